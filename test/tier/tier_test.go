package tier

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestRequired(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{name: "developer machine", env: map[string]string{}, want: ""},
		{name: "CI", env: map[string]string{"CI": "true"}, want: "CI=true"},
		{name: "CI=false is not CI", env: map[string]string{"CI": "false"}, want: ""},
		{name: "asked for", env: map[string]string{EnvRequire: "1"}, want: EnvRequire + "=1"},
		{name: "asked for in CI", env: map[string]string{EnvRequire: "1", "CI": "true"}, want: EnvRequire + "=1"},
		{name: "RDMANET_REQUIRE_NETNS=0", env: map[string]string{EnvRequire: "0"}, want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Required(func(k string) string { return tc.env[k] }); got != tc.want {
				t.Fatalf("Required = %q, want %q", got, tc.want)
			}
		})
	}
}

// helperEnv makes TestUnavailableHelper call Unavailable (only in the child).
const helperEnv = "RDMANET_TIER_HELPER"

func TestUnavailableHelper(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("helper of TestUnavailable, runs in a child process")
	}
	Unavailable(t, "example", "needs root")
	t.Error("Unavailable returned")
}

// TestUnavailable runs a test that calls Unavailable in a child process:
// it skips on a developer's machine and fails where the tier is required.
func TestUnavailable(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		env      []string
		wantFail bool
		wantOut  string
	}{
		{name: "developer machine: skip", wantOut: "example tier skipped: needs root"},
		{name: "CI: fail", env: []string{"CI=true"}, wantFail: true, wantOut: "example tier cannot run: needs root (CI=true: a required tier must not skip)"},
		{name: "RDMANET_REQUIRE_NETNS=1: fail", env: []string{EnvRequire + "=1"}, wantFail: true, wantOut: "(RDMANET_REQUIRE_NETNS=1: a required tier must not skip)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(exe, "-test.run=^TestUnavailableHelper$", "-test.v")
			var env []string
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "CI=") && !strings.HasPrefix(kv, EnvRequire+"=") {
					env = append(env, kv)
				}
			}
			cmd.Env = append(append(env, helperEnv+"=1"), tc.env...)
			out, err := cmd.CombinedOutput()
			if failed := err != nil; failed != tc.wantFail {
				t.Fatalf("child failed: %v, want %v\n%s", failed, tc.wantFail, out)
			}
			if !strings.Contains(string(out), tc.wantOut) {
				t.Fatalf("child output does not say %q:\n%s", tc.wantOut, out)
			}
		})
	}
}
