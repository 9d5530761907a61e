package depcheck_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/version"
)

// TestShippedBinariesLinkNoTestCode keeps test harnesses and example files out
// of every shipped binary: each cmd/* (what make build installs and the
// image ships), in the production build and in the test-hooks build of the
// simulated-node image, must not depend on a package under test/ or
// examples/. Code a binary needs at run time (the demo's sysfs builder and
// manifests) lives under internal/.
func TestShippedBinariesLinkNoTestCode(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to list the binaries' dependencies: %v", err)
	}
	root := filepath.Join("..", "..")
	cmds, err := os.ReadDir(filepath.Join(root, "cmd"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, c := range cmds {
		if c.IsDir() {
			want = append(want, version.Module+"/cmd/"+c.Name())
		}
	}
	if len(want) == 0 {
		t.Fatal("no cmd/* directories found")
	}
	forbidden := []string{version.Module + "/test/", version.Module + "/examples/"}
	for _, tc := range []struct{ name, tags string }{
		{"production build", ""},
		{"test-hooks build (simulated-node image, make demo)", "rdmanet_testhooks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(goBin, "list", "-tags="+tc.tags, "-f", `{{.ImportPath}} {{join .Deps " "}}`, "./cmd/...")
			cmd.Dir = root
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list ./cmd/...: %v", err)
			}
			var seen []string
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				f := strings.Fields(line)
				bin := f[0]
				seen = append(seen, bin)
				for _, d := range f[1:] {
					for _, p := range forbidden {
						if strings.HasPrefix(d, p) {
							t.Errorf("%s links %s: a shipped binary must not carry test or example code; move what it needs at run time under internal/", bin, d)
						}
					}
				}
			}
			for _, w := range want {
				if !slices.Contains(seen, w) {
					t.Errorf("go list did not list %s: its dependencies were not checked", w)
				}
			}
		})
	}
}
