//go:build crossarch

// Package crossarch smoke-runs the arm64 build of every rdmanet binary
// under user-mode emulation (Debian's qemu-user-static: qemu-aarch64-static
// ELF) next to the same build for this machine: --version reports VERSION,
// --help succeeds, `kubectl rdma lint` of the seeds and rdmanet-agent
// --once on the sysfs fixture give the same output and exit code on both
// architectures. `make smoke-arm64` (mk/release.mk) runs it; it fails, never
// skips, when qemu is missing.
package crossarch

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rdmanet/rdmanet/internal/image"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
	"github.com/rdmanet/rdmanet/internal/version"
	"github.com/rdmanet/rdmanet/test/apiserver"
)

// qemu finds the aarch64 user-mode emulator (RDMANET_QEMU_AARCH64 wins).
func qemu(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("RDMANET_QEMU_AARCH64"); p != "" {
		return p
	}
	for _, n := range []string{"qemu-aarch64-static", "qemu-aarch64"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	t.Fatal("no qemu-aarch64-static or qemu-aarch64 on PATH: apt-get install -y qemu-user-static (hack/install-debs.sh installs it)")
	return ""
}

type result struct {
	out  []byte
	code int
}

func run(t *testing.T, prefix []string, bin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	argv := append(append(append([]string{}, prefix...), bin), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return result{out, 0}
	case errors.As(err, &ee):
		return result{out, ee.ExitCode()}
	}
	t.Fatalf("%v: %v\n%s", argv, err, out)
	return result{}
}

// emulateSiblings makes the thin plugins' exec fallback work under
// user-mode emulation without binfmt_misc: a thin plugin (rdma, sriov,
// rdmanet-ipam, ...) runs its "<name>-direct" sibling next to its own
// executable, and an emulated process cannot execve an arm64 ELF. Each
// "-direct" binary moves to a directory of its own and its place in dir is
// taken by a script that runs it under qemu, so the emulated thin plugin's
// exec reaches the emulated arm64 direct binary. Returns where each moved
// binary is now.
func emulateSiblings(t *testing.T, qemu, dir string, names []string) map[string]string {
	t.Helper()
	realDir := dir + "-direct"
	if err := os.MkdirAll(realDir, 0o755); err != nil {
		t.Fatal(err)
	}
	moved := map[string]string{}
	for _, n := range names {
		if !strings.HasSuffix(n, "-direct") {
			continue
		}
		to := filepath.Join(realDir, n)
		if err := os.Rename(filepath.Join(dir, n), to); err != nil {
			t.Fatal(err)
		}
		script := "#!/bin/sh\nexec '" + qemu + "' '" + to + "' \"$@\"\n"
		if err := os.WriteFile(filepath.Join(dir, n), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		moved[n] = to
	}
	return moved
}

func TestArm64Smoke(t *testing.T) {
	if runtime.GOARCH == "arm64" {
		t.Fatal("this machine is arm64: the smoke test compares an emulated arm64 build with this machine's build")
	}
	q := qemu(t)
	root, err := apiserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	v, err := image.ReadVersionFile(root)
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string]string{}
	var names []string
	for _, arch := range []string{"arm64", runtime.GOARCH} {
		dirs[arch] = filepath.Join(t.TempDir(), arch)
		bins, err := image.GoBuild{Dir: root, Packages: []string{"./cmd/..."}, OutDir: dirs[arch], Version: v, GOARCH: arch}.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if arch == "arm64" {
			for _, b := range bins {
				names = append(names, filepath.Base(b))
			}
		}
	}
	real := emulateSiblings(t, q, dirs["arm64"], names)
	arm := func(t *testing.T, bin string, args ...string) result {
		if p, ok := real[bin]; ok {
			return run(t, []string{q}, p, args...)
		}
		return run(t, []string{q}, filepath.Join(dirs["arm64"], bin), args...)
	}
	host := func(t *testing.T, bin string, args ...string) result {
		return run(t, nil, filepath.Join(dirs[runtime.GOARCH], bin), args...)
	}
	same := func(t *testing.T, bin string, args ...string) result {
		t.Helper()
		a, h := arm(t, bin, args...), host(t, bin, args...)
		if a.code != h.code || !bytes.Equal(a.out, h.out) {
			t.Fatalf("%s %v: arm64 exit %d output\n%s\n%s: exit %d output\n%s", bin, args, a.code, a.out, runtime.GOARCH, h.code, h.out)
		}
		return a
	}
	for _, n := range names {
		t.Run(n, func(t *testing.T) {
			r := arm(t, n, "--version")
			_, got, ok := version.Parse(string(r.out))
			if r.code != 0 || !ok || got != v {
				t.Fatalf("arm64 %s --version: exit %d, %q; want version %s", n, r.code, r.out, v)
			}
			if r := arm(t, n, "--help"); r.code != 0 || len(r.out) == 0 {
				t.Fatalf("arm64 %s --help: exit %d\n%s", n, r.code, r.out)
			}
		})
	}
	t.Run("kubectl rdma lint of the seeds", func(t *testing.T) {
		seeds, _ := filepath.Glob(filepath.Join(root, "examples", "seeds", "*"))
		var n int
		for _, s := range seeds {
			if st, err := os.Stat(s); err != nil || !st.IsDir() {
				continue
			}
			r := same(t, "kubectl-rdma", "lint", "-f", s)
			if len(bytes.TrimSpace(r.out)) == 0 || r.code > 2 {
				t.Errorf("lint %s: exit %d, output %q", s, r.code, r.out)
			}
			n++
		}
		if n == 0 {
			t.Fatal("no seed directories under examples/seeds")
		}
	})
	t.Run("rdmanet-agent --once on the sysfs fixture", func(t *testing.T) {
		dir := t.TempDir()
		fix, err := sysfsfixture.NewStandard(filepath.Join(dir, "sys"), sysfsfixture.StandardOptions{RoCEVFs: 4})
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := os.ReadFile(filepath.Join(root, "examples", "seeds", "exclusive", "sriovdp-config.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		// the seed's ConfigMap: its config.json
		_, js, ok := strings.Cut(string(cfg), "config.json: |")
		if !ok {
			t.Fatalf("examples/seeds/exclusive/sriovdp-config.yaml has no config.json")
		}
		conf := filepath.Join(dir, "config.json")
		if err := os.WriteFile(conf, []byte(js), 0o644); err != nil {
			t.Fatal(err)
		}
		args := []string{"--config=" + conf, "--sysfs-root=" + fix.Root, "--device-plugin-dir=" + filepath.Join(dir, "dp"),
			"--devinfo-dir=" + filepath.Join(dir, "devinfo"), "--once", "-o", "json"}
		r := same(t, "rdmanet-agent", args...)
		if r.code != 0 || !bytes.Contains(r.out, []byte(`"resourceName"`)) && !bytes.Contains(r.out, []byte(`sriov_rdma`)) {
			t.Fatalf("rdmanet-agent --once: exit %d\n%s", r.code, r.out)
		}
	})
}
