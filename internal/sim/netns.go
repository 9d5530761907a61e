package sim

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/containernetworking/plugins/pkg/ns"
	"golang.org/x/sys/unix"
)

// NetnsRunDir is where named network namespaces live (as `ip netns` keeps
// them), so `ip netns exec <name> ...` works on what the demo creates.
const NetnsRunDir = "/run/netns"

// NetnsPath is the bind mount of the named namespace.
func NetnsPath(name string) string { return filepath.Join(NetnsRunDir, name) }

// newNamedNS creates a persistent network namespace bind-mounted at
// /run/netns/<name>, without switching the caller to it. It refuses a name
// that exists: the demo never reuses somebody else's namespace.
func newNamedNS(name string) (ns.NetNS, error) {
	if err := os.MkdirAll(NetnsRunDir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", NetnsRunDir, err)
	}
	// /run/netns must be a shared mount point so the bind mounts are seen by
	// other mount namespaces (what `ip netns add` does too).
	if err := unix.Mount("", NetnsRunDir, "none", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		if !errors.Is(err, unix.EINVAL) {
			return nil, fmt.Errorf("mount --make-rshared %s: %w", NetnsRunDir, err)
		}
		if err := unix.Mount(NetnsRunDir, NetnsRunDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return nil, fmt.Errorf("mount --rbind %s %s: %w", NetnsRunDir, NetnsRunDir, err)
		}
		if err := unix.Mount("", NetnsRunDir, "none", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
			return nil, fmt.Errorf("mount --make-rshared %s: %w", NetnsRunDir, err)
		}
	}
	p := NetnsPath(name)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("network namespace %s already exists; fix: remove it with `ip netns del %s` (or `kubectl rdma demo --cleanup` if a demo left it)", name, name)
		}
		return nil, fmt.Errorf("create netns mount point %s: %w", p, err)
	}
	f.Close()
	var merr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The thread is left locked: Go retires it when the goroutine ends,
		// so no thread ever returns to the pool inside the new namespace.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			merr = fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
			return
		}
		self := fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
		if err := unix.Mount(self, p, "none", unix.MS_BIND, ""); err != nil {
			merr = fmt.Errorf("bind mount netns at %s: %w", p, err)
		}
	}()
	<-done
	if merr != nil {
		_ = os.Remove(p)
		return nil, fmt.Errorf("create network namespace %s: %w", name, merr)
	}
	n, err := ns.GetNS(p)
	if err != nil {
		_ = deleteNamedNS(name)
		return nil, fmt.Errorf("open network namespace %s: %w", name, err)
	}
	return n, nil
}

// deleteNamedNS unmounts and removes /run/netns/<name>; a missing one is
// not an error. The namespace dies with its last reference.
func deleteNamedNS(name string) error {
	p := NetnsPath(name)
	if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount netns %s: %w", p, err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove netns %s: %w", p, err)
	}
	return nil
}

// openNamedNS opens an existing named namespace.
func openNamedNS(name string) (ns.NetNS, error) {
	n, err := ns.GetNS(NetnsPath(name))
	if err != nil {
		return nil, fmt.Errorf("network namespace %s: %w", name, err)
	}
	return n, nil
}

// CheckPrereqs tells exactly what is missing to run the demo: root and the
// ability to create network namespaces. nil when everything is there.
func CheckPrereqs() error {
	if os.Geteuid() != 0 {
		return errors.New("needs root: it creates network namespaces, veth pairs and bind mounts under /run/netns; fix: run it with sudo (e.g. `sudo make demo`)")
	}
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		return fmt.Errorf("this kernel has no network namespaces (/proc/self/ns/net: %v); fix: run on Linux with CONFIG_NET_NS", err)
	}
	var uerr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread is retired
		uerr = unix.Unshare(unix.CLONE_NEWNET)
	}()
	<-done
	if uerr != nil {
		return fmt.Errorf("cannot create a network namespace even as root: unshare(CLONE_NEWNET): %v; fix: give the container CAP_SYS_ADMIN and CAP_NET_ADMIN (e.g. docker run --privileged)", uerr)
	}
	return nil
}
