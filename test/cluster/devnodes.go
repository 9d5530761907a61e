package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rdmanet/rdmanet/internal/sysfs"
)

// writeDevNodes creates node n's /dev/infiniband: one character device
// per uverbs/umad/issm device the fixture's RDMA functions declare (with the
// major:minor its sysfs "dev" file names), and rdma_cm. The supervisor
// bind-mounts the directory over /dev/infiniband in the node's mount
// namespace, so the agent's Allocate answer (these paths) can be honoured by
// containerd. No kernel driver serves these numbers here: opening one in a
// pod fails, as the machine has no RDMA subsystem.
func writeDevNodes(l Layout, n Node) error {
	dir := l.NodeDir(n, "dev/infiniband")
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clear %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	fs := sysfs.New(l.NodeSysfs(n))
	bdfs, err := fs.PCIDevices()
	if err != nil {
		return fmt.Errorf("fixture PCI devices: %w", err)
	}
	nodes := map[string]string{"rdma_cm": "10:58"}
	for _, bdf := range bdfs {
		for _, c := range fs.CharDevs(bdf) {
			nodes[c.Name] = c.Dev
		}
	}
	for name, dev := range nodes {
		if dev == "" {
			dev = kernelDev(name) // the fixture leaves some "dev" files out
		}
		maj, min, err := parseDev(dev)
		if err != nil {
			return fmt.Errorf("fixture char device %s: %w", name, err)
		}
		p := filepath.Join(dir, name)
		if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(maj, min))); err != nil {
			return fmt.Errorf("mknod %s: %w", p, err)
		}
	}
	return nil
}

func parseDev(s string) (uint32, uint32, error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return 0, 0, fmt.Errorf("dev %q: want major:minor", s)
	}
	maj, err := strconv.ParseUint(a, 10, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("dev %q: %w", s, err)
	}
	min, err := strconv.ParseUint(b, 10, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("dev %q: %w", s, err)
	}
	return uint32(maj), uint32(min), nil
}

// kernelDev is the number the kernel gives an InfiniBand char device:
// umadN 231:N, issmN 231:64+N, uverbsN 231:192+N.
func kernelDev(name string) string {
	for _, p := range []struct {
		prefix string
		base   int
	}{{"umad", 0}, {"issm", 64}, {"uverbs", 192}} {
		if n, err := strconv.Atoi(strings.TrimPrefix(name, p.prefix)); err == nil && strings.HasPrefix(name, p.prefix) {
			return fmt.Sprintf("231:%d", p.base+n)
		}
	}
	return ""
}
