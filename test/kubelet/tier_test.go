package kubelet

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestWithoutRootFailsInCI (issue 13, defect 14) runs this very test binary
// as an unprivileged user (nobody), as a developer's `go test` without sudo
// would: the kubelet tier skips there on its own, but fails when CI=true or
// RDMANET_REQUIRE_NETNS=1 says it is required. Before the fix it skipped in
// all three cases.
func TestWithoutRootFailsInCI(t *testing.T) {
	freshPluginDir(t) // root, in the private mount namespace
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// a copy nobody can execute (go test's build dir is private)
	dir, err := os.MkdirTemp("", "rdmanet-kubelet-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "kubelet.test")
	copyExecutable(t, exe, bin)
	tests := []struct {
		name     string
		env      []string
		wantFail bool
		wantOut  string
	}{
		{name: "developer machine: skips with the reason", wantOut: "kubelet tier skipped: needs root"},
		{name: "CI=true: fails", env: []string{"CI=true"}, wantFail: true, wantOut: "kubelet tier cannot run: needs root"},
		{name: "RDMANET_REQUIRE_NETNS=1: fails", env: []string{"RDMANET_REQUIRE_NETNS=1"}, wantFail: true, wantOut: "(RDMANET_REQUIRE_NETNS=1: a required tier must not skip)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, "-test.run=^TestRegistration$", "-test.v", "-test.count=1")
			cmd.Dir = dir
			env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TMPDIR=" + dir}
			cmd.Env = append(env, tc.env...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				t.Fatalf("run as nobody: %v\n%s", err, out)
			}
			if failed := err != nil; failed != tc.wantFail {
				t.Fatalf("as nobody with %v: failed %v, want %v\n%s", tc.env, failed, tc.wantFail, out)
			}
			if !strings.Contains(string(out), tc.wantOut) {
				t.Fatalf("output does not say %q:\n%s", tc.wantOut, out)
			}
		})
	}
}

func copyExecutable(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
