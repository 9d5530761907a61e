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
	"slices"
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
	// The thin plugins' per-call fallbacks, built with them.
	SRIOVDirect = "github.com/rdmanet/rdmanet/cmd/sriov-direct"
	RDMADirect  = "github.com/rdmanet/rdmanet/cmd/rdma-direct"
	IPAMDirect  = "github.com/rdmanet/rdmanet/cmd/rdmanet-ipam-direct"
	Bridge      = "github.com/containernetworking/plugins/plugins/main/bridge"
	Macvlan     = "github.com/containernetworking/plugins/plugins/main/macvlan"
	HostLocal   = "github.com/containernetworking/plugins/plugins/ipam/host-local"
	Portmap     = "github.com/containernetworking/plugins/plugins/meta/portmap"
	Bandwidth   = "github.com/containernetworking/plugins/plugins/meta/bandwidth"
)

// TestHooksTag is the build tag under which rdmanet's plugins honour the
// test switches (RDMANET_NETOPS=record, RDMANET_CNI_FAULT); it is
// netops.TestHooksTag, spelled out so that this package stays free of the
// plugins' dependencies.
const TestHooksTag = "rdmanet_testhooks"

// Options of one build.
type Options struct {
	// Tags are the Go build tags (nil: a production build, as shipped).
	Tags []string
	// VCS forces the VCS stamp on (-buildvcs=true); otherwise binaries are
	// stamped only inside a git work tree.
	VCS bool
	// Static builds as the image ships them (CGO_ENABLED=0, -trimpath; see
	// internal/image.GoBuild): static binaries start without the dynamic
	// loader, which the benchmarks of exec'd plugins must not pay.
	Static bool
}

// Test is what the tests build by default: the test switches on.
var Test = Options{Tags: []string{TestHooksTag}}

// Build runs one `go build -tags rdmanet_testhooks -o dir/` for pkgs (one
// process, so the build cache is shared and every binary has the same
// build settings) and, when IPAM is among them, installs rdmanet-ipam under
// the Whereabouts name too. The tag makes the plugins honour the tests'
// RDMANET_NETOPS=record and RDMANET_CNI_FAULT; a daemon built in the same
// call runs them in-process (same build settings). Inside a git work tree
// the binaries are VCS-stamped, as release builds are; elsewhere unstamped.
func Build(dir string, pkgs ...string) error { return BuildWith(dir, Test, pkgs...) }

// BuildVCS is Build with the VCS stamp forced on (-buildvcs=true, over a
// GOFLAGS=-buildvcs=false of the caller's), for tests of what tells one
// rdmanet build from another: the binaries carry vcs.revision.
func BuildVCS(dir string, pkgs ...string) error {
	o := Test
	o.VCS = true
	return BuildWith(dir, o, pkgs...)
}

// BuildWith builds pkgs into dir with explicit options; Options{} is a
// production build (no tags), for tests of what shipped binaries do.
// Inside a git work tree the binaries are always VCS-stamped.
func BuildWith(dir string, o Options, pkgs ...string) error {
	var env []string
	if o.VCS || inGitWorkTree() {
		env = []string{"GOFLAGS=" + strings.TrimSpace(os.Getenv("GOFLAGS")+" -buildvcs=true")}
	}
	args := []string{"build"}
	if o.Static {
		env = append(env, "CGO_ENABLED=0")
		args = append(args, "-trimpath")
	}
	if len(o.Tags) > 0 {
		args = append(args, "-tags", strings.Join(o.Tags, ","))
	}
	return build(dir, env, append(args, "-o", dir+string(filepath.Separator)), pkgs...)
}

func inGitWorkTree() bool {
	out, err := exec.Command("git", "rev-parse", "--is-inside-work-tree").Output()
	return err == nil && strings.TrimSpace(string(out)) == "true"
}

func build(dir string, env, args []string, pkgs ...string) error {
	pkgs = slices.Clone(pkgs)
	for thin, direct := range map[string]string{SRIOV: SRIOVDirect, RDMA: RDMADirect, IPAM: IPAMDirect} {
		if slices.Contains(pkgs, thin) && !slices.Contains(pkgs, direct) {
			pkgs = append(pkgs, direct) // the thin plugin becomes it without a daemon
		}
	}
	cmd := exec.Command("go", append(args, pkgs...)...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s %v: %w\n%s", strings.Join(args[:len(args)-2], " "), pkgs, err, out)
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
