// Package depcheck keeps packages out of a binary: the CNI binaries are
// exec'd per call, so what they link (and initialise) is on every pod's
// attachment path. Used by the cmd/*/deps_test.go tests.
package depcheck

import (
	"os/exec"
	"strings"
	"testing"
)

// Rule forbids every package whose import path starts with Prefix.
type Rule struct {
	Name, Prefix, Why string
}

// Forbid lists the dependencies of the package in the current directory
// (`go list -deps .`) and fails one subtest per rule that a dependency breaks.
func Forbid(t *testing.T, binary string, rules []Rule) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to list %s's dependencies: %v", binary, err)
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, r := range rules {
		t.Run(r.Name, func(t *testing.T) {
			for _, d := range deps {
				if strings.HasPrefix(d, r.Prefix) {
					t.Errorf("%s links %s: %s", binary, d, r.Why)
				}
			}
		})
	}
}
