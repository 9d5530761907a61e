// Package pluginbin builds CNI plugin binaries for tests into a directory a
// runtime (libcni) then uses as its CNI path: the project's own plugins and
// the upstream ones, by import path, plus the aliases a node installs
// (rdmanet-ipam as "whereabouts", so the seed NAD runs unchanged).
package pluginbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Import paths of the plugins the tests exec.
const (
	Meta       = "github.com/rdmanet/rdmanet/cmd/rdmanet"
	MetaDirect = "github.com/rdmanet/rdmanet/cmd/rdmanet-direct"
	MetaDaemon = "github.com/rdmanet/rdmanet/cmd/rdmanet-daemon"
	SRIOV      = "github.com/rdmanet/rdmanet/cmd/sriov"
	RDMA       = "github.com/rdmanet/rdmanet/cmd/rdma"
	IPAM       = "github.com/rdmanet/rdmanet/cmd/rdmanet-ipam"
	Bridge     = "github.com/containernetworking/plugins/plugins/main/bridge"
	Macvlan    = "github.com/containernetworking/plugins/plugins/main/macvlan"
	HostLocal  = "github.com/containernetworking/plugins/plugins/ipam/host-local"
)

// Build runs one `go build -o dir/` for pkgs (one process, so the build
// cache is shared) and, when IPAM is among them, installs rdmanet-ipam
// under the Whereabouts name too. Inside a git work tree the binaries are
// VCS-stamped, as release builds are, so the daemon built with them runs
// them in-process (internal/cni/inproc); elsewhere they are built unstamped.
func Build(dir string, pkgs ...string) error {
	if inGitWorkTree() {
		return BuildVCS(dir, pkgs...)
	}
	return build(dir, nil, pkgs...)
}

func inGitWorkTree() bool {
	out, err := exec.Command("git", "rev-parse", "--is-inside-work-tree").Output()
	return err == nil && strings.TrimSpace(string(out)) == "true"
}

// BuildVCS is Build with the VCS stamp forced on (-buildvcs=true, over a
// GOFLAGS=-buildvcs=false of the caller's), for tests of what tells one
// rdmanet build from another: the binaries carry vcs.revision.
func BuildVCS(dir string, pkgs ...string) error {
	return build(dir, []string{"GOFLAGS=" + strings.TrimSpace(os.Getenv("GOFLAGS")+" -buildvcs=true")}, pkgs...)
}

func build(dir string, env []string, pkgs ...string) error {
	cmd := exec.Command("go", append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %v: %v\n%s", pkgs, err, out)
	}
	for _, p := range pkgs {
		if p == IPAM {
			if err := os.Symlink("rdmanet-ipam", filepath.Join(dir, "whereabouts")); err != nil && !os.IsExist(err) {
				return fmt.Errorf("install rdmanet-ipam as whereabouts: %w", err)
			}
		}
	}
	return nil
}

// TempDir builds pkgs into a new temporary directory and returns it; the
// caller removes it.
func TempDir(prefix string, pkgs ...string) (string, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	if err := Build(dir, pkgs...); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}
