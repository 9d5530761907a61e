package kubelet

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/rdmanet/rdmanet/test/tier"
)

// kubelet's device manager has exactly one exported constructor,
// devicemanager.NewManagerImpl, and it listens on the fixed path
// pluginapi.KubeletSocket (/var/lib/kubelet/device-plugins/kubelet.sock).
// The socket-path constructor is unexported. So that the real manager can
// run without touching the host's kubelet directory, TestMain re-executes
// the test binary in a private mount namespace (CLONE_NEWNS, propagation
// private: nothing mounted there is seen by the host) and every test mounts
// a fresh tmpfs over the fixed directory.

const reexecEnv = "RDMANET_KUBELET_TEST_PRIVATE_MOUNTS"

// pluginDir is kubelet's fixed device-plugin directory.
var pluginDir = filepath.Clean(pluginapi.DevicePluginPath)

// isolation is empty when the private mount namespace is ready, else the
// reason the tests cannot run: they skip on a developer's machine and fail
// in CI (CI=true) or with RDMANET_REQUIRE_NETNS=1 (test/tier).
var isolation string

func TestMain(m *testing.M) {
	if os.Getenv(reexecEnv) == "" {
		if os.Geteuid() != 0 {
			isolation = "needs root: kubelet's device manager listens on the fixed path " + pluginapi.KubeletSocket +
				", which the tests make private with a mount namespace (CI runs as root)"
			os.Exit(m.Run())
		}
		os.Exit(reexec())
	}
	if err := privateKubeletDir(); err != nil {
		fmt.Fprintf(os.Stderr, "kubelet test harness: %v\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// reexec runs this test binary again in a new mount namespace and returns
// its exit code. Go's os/exec makes the new namespace's mounts private
// (MS_REC|MS_PRIVATE on /), as `unshare --mount --propagation private` does.
func reexec() int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubelet test harness: %v\n", err)
		return 1
	}
	cmd := exec.Command(exe, os.Args[1:]...)
	cmd.Env = append(os.Environ(), reexecEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	default:
		fmt.Fprintf(os.Stderr, "kubelet test harness: cannot create a private mount namespace: %v\n", err)
		return 1
	}
}

// privateKubeletDir makes pluginDir exist inside the private namespace
// without creating anything on the host: when the directory (or a parent)
// is missing, the nearest existing ancestor gets an overlay whose upper
// layer is a tmpfs, so its content stays visible and the new directories
// exist only here. Without overlayfs, a tmpfs replaces that ancestor (its
// content is then hidden from this test process only).
func privateKubeletDir() error {
	if fi, err := os.Stat(pluginDir); err == nil && fi.IsDir() {
		return nil // each test mounts its own tmpfs over it
	}
	anc := filepath.Dir(pluginDir)
	for {
		if fi, err := os.Stat(anc); err == nil && fi.IsDir() {
			break
		}
		anc = filepath.Dir(anc)
	}
	upper, err := os.MkdirTemp("", "rdmanet-kubelet-overlay-")
	if err != nil {
		return err
	}
	if err := syscall.Mount("tmpfs", upper, "tmpfs", 0, "mode=0755"); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", upper, err)
	}
	for _, d := range []string{"upper", "work"} {
		if err := os.Mkdir(filepath.Join(upper, d), 0o755); err != nil {
			return err
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", anc, filepath.Join(upper, "upper"), filepath.Join(upper, "work"))
	if err := syscall.Mount("overlay", anc, "overlay", 0, opts); err != nil {
		if err := syscall.Mount("tmpfs", anc, "tmpfs", 0, "mode=0755"); err != nil {
			return fmt.Errorf("mount tmpfs on %s: %w", anc, err)
		}
	}
	return os.MkdirAll(pluginDir, 0o750)
}

// freshPluginDir mounts an empty tmpfs over kubelet's device-plugin
// directory for one test; the mount goes away when the test ends.
func freshPluginDir(t testing.TB) {
	t.Helper()
	if isolation != "" {
		tier.Unavailable(t, "kubelet", isolation) // fails in CI / with RDMANET_REQUIRE_NETNS=1
	}
	if err := syscall.Mount("tmpfs", pluginDir, "tmpfs", 0, "mode=0750"); err != nil {
		t.Fatalf("mount tmpfs on %s: %v", pluginDir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(pluginDir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", pluginDir, err)
		}
	})
}
