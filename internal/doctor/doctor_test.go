package doctor_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rdmanet/rdmanet/internal/doctor"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
	"github.com/rdmanet/rdmanet/test/pluginbin"
)

// host is a fixture node: sysfs (the bundled GPU node), procfs (limits,
// status, net/route) and /dev (uverbs nodes of every RDMA device).
type host struct {
	root, sys, proc, dev string
	std                  *sysfsfixture.Standard
	node                 *sysfsfixture.Node
	opts                 doctor.GatherOptions
}

const (
	limitsUnlimited = "Limit                     Soft Limit           Hard Limit           Units     \nMax cpu time              unlimited            unlimited            seconds   \nMax locked memory         unlimited            unlimited            bytes     \n"
	limits8MiB      = "Limit                     Soft Limit           Hard Limit           Units     \nMax locked memory         8388608              8388608              bytes     \n"
	statusIPCLock   = "Name:\tpython\nCapInh:\t0000000000000000\nCapPrm:\t00000000a80465fb\nCapEff:\t00000000a80465fb\n" // docker default + IPC_LOCK (bit 14)
	statusNoIPCLock = "Name:\tpython\nCapInh:\t0000000000000000\nCapPrm:\t00000000a80425fb\nCapEff:\t00000000a80425fb\n" // docker default
	routeHeader     = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
)

func routeVia(ifs ...string) string {
	s := routeHeader
	for _, i := range ifs {
		s += i + "\t00000000\t0100A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
	}
	return s + "enp65s0f0np0\t0000000A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n"
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// shared is one standard sysfs tree for the cases that only read it
// (writing the tree takes seconds on a loaded machine).
var shared struct {
	once sync.Once
	dir  string
	std  *sysfsfixture.Standard
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
	if thinDir != "" {
		_ = os.RemoveAll(thinDir)
	}
	os.Exit(code)
}

// newHost returns the standard node: fresh when the test changes sysfs,
// the shared read-only tree otherwise. The RDMA netns mode is exclusive
// (the kernel's answer) and the environment a consistent host-mode one.
func newHost(t *testing.T, fresh bool) *host {
	t.Helper()
	h := emptyHost(t)
	if fresh {
		std, err := sysfsfixture.NewStandard(h.sys, sysfsfixture.StandardOptions{})
		if err == nil {
			err = withSM(std)
		}
		if err != nil {
			t.Fatal(err)
		}
		h.std, h.node = std, std.Node
	} else {
		shared.once.Do(func() {
			if shared.dir, shared.err = os.MkdirTemp("", "doctor-sys-"); shared.err == nil {
				shared.std, shared.err = sysfsfixture.NewStandard(shared.dir, sysfsfixture.StandardOptions{})
			}
			if shared.err == nil {
				shared.err = withSM(shared.std)
			}
		})
		if shared.err != nil {
			t.Fatal(shared.err)
		}
		h.sys, h.opts.SysfsRoot = shared.dir, shared.dir
		h.std, h.node = shared.std, nil // read-only: no fixture mutators
	}
	for i := 0; i < 28; i++ {
		write(t, filepath.Join(h.dev, "infiniband", "uverbs"+strconv.Itoa(i)), "")
	}
	return h
}

// withSM gives the standard node's InfiniBand port what a subnet manager
// sets (LID, SM LID, the default partition), as on a working fabric.
func withSM(std *sysfsfixture.Standard) error {
	return std.SetIBPort(std.IB.RDMADev, sysfsfixture.IBPort{LID: 0x21, SMLID: 1})
}

// emptyHost has procfs and /dev but an empty sysfs tree.
func emptyHost(t *testing.T) *host {
	t.Helper()
	root := t.TempDir()
	h := &host{root: root, sys: filepath.Join(root, "sys"), proc: filepath.Join(root, "proc"), dev: filepath.Join(root, "dev")}
	n, err := sysfsfixture.New(h.sys)
	if err != nil {
		t.Fatal(err)
	}
	h.node = n
	write(t, filepath.Join(h.proc, "self/limits"), limitsUnlimited)
	write(t, filepath.Join(h.proc, "self/status"), statusIPCLock)
	write(t, filepath.Join(h.proc, "self/net/route"), routeVia("eno1"))
	if err := os.MkdirAll(filepath.Join(h.dev, "infiniband"), 0o755); err != nil {
		t.Fatal(err)
	}
	h.opts = doctor.GatherOptions{
		SysfsRoot: h.sys, ProcRoot: h.proc, DevRoot: h.dev,
		NetnsMode: func() (string, error) { return "exclusive", nil },
		Env: map[string]string{
			"NCCL_IB_HCA":        "=mlx5_1",
			"NCCL_SOCKET_IFNAME": "enp65s0f0np0",
			"NCCL_IB_GID_INDEX":  "3",
			"NCCL_IB_DISABLE":    "0",
			"PATH":               "/usr/bin",
		},
		EnvSource: "test",
		PKeys:     []uint16{0x7fff},
	}
	return h
}

func (h *host) run(t *testing.T) *doctor.Report {
	t.Helper()
	in, err := doctor.Gather(h.opts)
	if err != nil {
		t.Fatal(err)
	}
	return doctor.Run(in)
}

func (h *host) portFile(ibdev, name string) string {
	return filepath.Join(h.sys, "class/infiniband", ibdev, "ports/1", name)
}

func kernelErr() (string, error) {
	return "", errors.New("rdma system: protocol not supported (is the ib_core module loaded?)")
}

func TestChecks(t *testing.T) {
	noRDMA := func(t *testing.T, h *host) {
		std := sysfsfixture.Function{BDF: "0000:17:00.0", Vendor: sysfsfixture.VendorIntel, Device: sysfsfixture.DeviceX710, Driver: "i40e", Netdev: "ens1f0"}
		if err := h.node.AddFunction(std); err != nil {
			t.Fatal(err)
		}
	}
	env := func(kv ...string) func(*testing.T, *host) {
		return func(t *testing.T, h *host) {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i+1] == "<unset>" {
					delete(h.opts.Env, kv[i])
				} else {
					h.opts.Env[kv[i]] = kv[i+1]
				}
			}
		}
	}
	chain := func(fs ...func(*testing.T, *host)) func(*testing.T, *host) {
		return func(t *testing.T, h *host) {
			for _, f := range fs {
				f(t, h)
			}
		}
	}
	tests := []struct {
		name  string
		id    string
		empty bool // start from an empty sysfs instead of the standard node
		fresh bool // the case changes sysfs: write its own standard node
		setup func(t *testing.T, h *host)
		want  doctor.Status
		msg   string // substring of a message with the wanted status
	}{
		{name: "rdma devices present", id: doctor.IDRDMADevices, want: doctor.Pass, msg: "28 RDMA device(s): mlx5_0, mlx5_1, mlx5_2, mlx5_3 and 24 of SR-IOV VFs"},
		{name: "no rdma device", id: doctor.IDRDMADevices, empty: true, setup: noRDMA, want: doctor.Fail, msg: "no RDMA device"},

		{name: "every device has a netdev", id: doctor.IDIbdev2netdev, want: doctor.Pass, msg: "all 4"},
		{name: "rdma device without netdev", id: doctor.IDIbdev2netdev, empty: true, setup: func(t *testing.T, h *host) {
			if err := h.node.AddFunction(sysfsfixture.Function{BDF: "0000:41:00.0", Vendor: "15b3", Device: "101d", Driver: "mlx5_core", RDMADev: "mlx5_0"}); err != nil {
				t.Fatal(err)
			}
		}, want: doctor.Warn, msg: "mlx5_0 (0000:41:00.0)"},

		{name: "shared-mode pod: HCA netdevs stay in the host netns", id: doctor.IDIbdev2netdev, empty: true, setup: func(t *testing.T, h *host) {
			if err := h.node.AddFunction(sysfsfixture.Function{BDF: "0000:81:00.0", Vendor: "15b3", Device: "101d", Driver: "mlx5_core", RDMADev: "mlx5_2"}); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(h.sys, "class/net/net1/operstate"), "up\n")
			write(t, filepath.Join(h.sys, "class/net/eth0/operstate"), "up\n")
		}, want: doctor.Pass, msg: "net1 exists: a pod in shared netns mode"},
		{name: "sysfs read completely", id: doctor.IDInventory, want: doctor.Pass, msg: "29 PCI network function(s)"},
		{name: "dangling pci link", fresh: true, id: doctor.IDInventory, setup: func(t *testing.T, h *host) {
			if err := os.Symlink("../../../devices/pci0000:99/0000:99:00.0", filepath.Join(h.sys, "bus/pci/devices/0000:99:00.0")); err != nil {
				t.Fatal(err)
			}
		}, want: doctor.Warn, msg: "0000:99:00.0"},

		{name: "IB port configured by an SM", id: doctor.IDIBPort, want: doctor.Pass, msg: "mlx5_3 port 1 (ibp193s0f0): LID 0x21, SM LID 0x1, PKeys 0xffff"},
		{name: "IB port without SM", fresh: true, id: doctor.IDIBPort, setup: func(t *testing.T, h *host) {
			if err := h.std.SetIBPort("mlx5_3", sysfsfixture.IBPort{}); err != nil {
				t.Fatal(err)
			}
		}, want: doctor.Fail, msg: "mlx5_3 port 1 (ibp193s0f0): LID 0: no subnet manager"},
		{name: "pod's PKey in the IB port's table", id: doctor.IDIBPKey, want: doctor.Pass, msg: "mlx5_3 port 1 (ibp193s0f0): full member of PKey 0xffff"},
		{name: "pod's PKey missing", id: doctor.IDIBPKey, setup: func(t *testing.T, h *host) { h.opts.PKeys = []uint16{0x8005} },
			want: doctor.Fail, msg: "PKey 0x8005 is not in the port's table (0xffff)"},

		{name: "ports active", id: doctor.IDPortState, want: doctor.Pass, msg: "mlx5_1 port 1 (enp65s0f0np0): ACTIVE, RoCE"},
		{name: "port down", fresh: true, id: doctor.IDPortState, setup: func(t *testing.T, h *host) {
			if err := h.node.SetPortState("mlx5_1", "1: DOWN"); err != nil {
				t.Fatal(err)
			}
		}, want: doctor.Fail, msg: "mlx5_1 port 1 (enp65s0f0np0) is DOWN"},
		{name: "IB port INIT without subnet manager", fresh: true, id: doctor.IDPortState, setup: func(t *testing.T, h *host) {
			if err := h.node.SetPortState("mlx5_3", "2: INIT"); err != nil {
				t.Fatal(err)
			}
		}, want: doctor.Fail, msg: "mlx5_3 port 1 (ibp193s0f0) is INIT"},

		{name: "netdevs up", id: doctor.IDNetdevState, want: doctor.Pass, msg: "enp65s0f0np0 (mlx5_1) is up"},
		{name: "netdev admin down", fresh: true, id: doctor.IDNetdevState, setup: func(t *testing.T, h *host) {
			if err := h.node.SetAdminUp("enp65s0f0np0", false); err != nil {
				t.Fatal(err)
			}
		}, want: doctor.Fail, msg: "administratively down"},
		{name: "netdev without carrier", fresh: true, id: doctor.IDNetdevState, setup: func(t *testing.T, h *host) {
			if err := h.node.SetOperState("ens8f0np0", "down"); err != nil {
				t.Fatal(err)
			}
		}, want: doctor.Fail, msg: "ens8f0np0 (mlx5_2) is up but its operstate is down"},

		{name: "link layers known", id: doctor.IDLinkLayer, want: doctor.Pass, msg: "RoCE (Ethernet): mlx5_0, mlx5_1, mlx5_2; InfiniBand: mlx5_3"},
		{name: "link layer unknown", fresh: true, id: doctor.IDLinkLayer, setup: func(t *testing.T, h *host) {
			write(t, h.portFile("mlx5_2", "link_layer"), "Unknown\n")
		}, want: doctor.Warn, msg: `mlx5_2 port 1 ("Unknown")`},

		{name: "netns mode from the kernel", id: doctor.IDNetnsMode, want: doctor.Pass, msg: "exclusive (kernel"},
		{name: "netns mode stated by flag", id: doctor.IDNetnsMode, setup: func(t *testing.T, h *host) {
			h.opts.NetnsMode, h.opts.NetnsModeFlag = kernelErr, "shared"
		}, want: doctor.Pass, msg: "shared (stated by --rdma-netns-mode; the kernel could not be asked: rdma system: protocol not supported"},
		{name: "netns mode unknown", id: doctor.IDNetnsMode, setup: func(t *testing.T, h *host) {
			h.opts.NetnsMode = kernelErr
		}, want: doctor.Warn, msg: "RDMA netns mode unknown"},
		{name: "netns flag disagrees with kernel", id: doctor.IDNetnsMode, setup: func(t *testing.T, h *host) {
			h.opts.NetnsModeFlag = "shared"
		}, want: doctor.Warn, msg: "--rdma-netns-mode=shared disagrees"},

		{name: "exclusive with RDMA VFs", id: doctor.IDNetnsFit, want: doctor.Pass, msg: "exclusive: 24 VF RDMA device(s)"},
		{name: "shared with RDMA VFs", id: doctor.IDNetnsFit, setup: func(t *testing.T, h *host) {
			h.opts.NetnsMode = func() (string, error) { return "shared", nil }
		}, want: doctor.Warn, msg: "netns mode shared but 24 SR-IOV VF(s)"},
		{name: "exclusive without VFs", id: doctor.IDNetnsFit, empty: true, setup: func(t *testing.T, h *host) {
			if err := h.node.AddFunction(sysfsfixture.Function{BDF: "0000:81:00.0", Vendor: "15b3", Device: "101d", Driver: "mlx5_core", Netdev: "ens8f0np0", RDMADev: "mlx5_0", IPv4: "192.168.2.10"}); err != nil {
				t.Fatal(err)
			}
		}, want: doctor.Warn, msg: "no SR-IOV VF has an RDMA device"},
		{name: "shared without VFs", id: doctor.IDNetnsFit, empty: true, setup: func(t *testing.T, h *host) {
			h.opts.NetnsMode = func() (string, error) { return "shared", nil }
			if err := h.node.AddFunction(sysfsfixture.Function{BDF: "0000:81:00.0", Vendor: "15b3", Device: "101d", Driver: "mlx5_core", Netdev: "ens8f0np0", RDMADev: "mlx5_0", IPv4: "192.168.2.10"}); err != nil {
				t.Fatal(err)
			}
		}, want: doctor.Pass, msg: "shared: every HCA"},

		{name: "VFs enabled", id: doctor.IDSRIOVVFs, want: doctor.Pass, msg: "enp65s0f0np0 (0000:41:00.0, mlx5_1): 16/16 VFs enabled"},
		{name: "no VFs enabled", fresh: true, id: doctor.IDSRIOVVFs, setup: func(t *testing.T, h *host) {
			if err := h.node.SetNumVFs(h.std.RoCE, 16, 0); err != nil {
				t.Fatal(err)
			}
		}, want: doctor.Warn, msg: "SR-IOV capable (up to 16 VFs) but has no VFs enabled"},
		{name: "fewer VFs than sriov_numvfs", fresh: true, id: doctor.IDSRIOVVFs, setup: func(t *testing.T, h *host) {
			if err := h.node.RemoveVF(h.std.RoCE, 15); err != nil {
				t.Fatal(err)
			}
		}, want: doctor.Warn, msg: "sriov_numvfs is 16 but only 15 VF(s)"},
		{name: "VF without RDMA device", fresh: true, id: doctor.IDSRIOVVFs, setup: func(t *testing.T, h *host) {
			if err := h.node.RemoveRDMA(sysfsfixture.VFBDF(h.std.RoCE.BDF, 0)); err != nil {
				t.Fatal(err)
			}
		}, want: doctor.Warn, msg: "1 of 16 VF(s) have a netdev here but no RDMA device"},

		{name: "RoCEv2 IPv4 GID present", id: doctor.IDRoCEGID, want: doctor.Pass, msg: "mlx5_1 port 1 (enp65s0f0np0): RoCEv2 IPv4 GID at index 3 (10.0.1.100)"},
		{name: "RoCE port without IPv4", id: doctor.IDRoCEGID, empty: true, setup: func(t *testing.T, h *host) {
			if err := h.node.AddFunction(sysfsfixture.Function{BDF: "0000:81:00.0", Vendor: "15b3", Device: "101d", Driver: "mlx5_core", Netdev: "ens8f0np0", RDMADev: "mlx5_0"}); err != nil {
				t.Fatal(err)
			}
		}, want: doctor.Warn, msg: "ens8f0np0 has no IPv4 address"},

		{name: "uverbs nodes present", id: doctor.IDDevInfiniband, want: doctor.Pass, msg: "all 28 uverbs node(s)"},
		{name: "no /dev/infiniband", id: doctor.IDDevInfiniband, setup: func(t *testing.T, h *host) {
			if err := os.RemoveAll(filepath.Join(h.dev, "infiniband")); err != nil {
				t.Fatal(err)
			}
		}, want: doctor.Fail, msg: "none of the 28 uverbs node(s)"},
		{name: "some uverbs nodes missing (a pod)", id: doctor.IDDevInfiniband, setup: func(t *testing.T, h *host) {
			if err := os.Remove(filepath.Join(h.dev, "infiniband/uverbs2")); err != nil {
				t.Fatal(err)
			}
		}, want: doctor.Warn, msg: "27 of 28 uverbs node(s) present; missing: " + "DEV/infiniband/uverbs2 (mlx5_2)"},

		{name: "memlock unlimited", id: doctor.IDMemlock, want: doctor.Pass, msg: "unlimited"},
		{name: "memlock limited but IPC_LOCK", id: doctor.IDMemlock, setup: func(t *testing.T, h *host) {
			write(t, filepath.Join(h.proc, "self/limits"), limits8MiB)
		}, want: doctor.Pass, msg: "limited to 8 MiB"},
		{name: "memlock limited without IPC_LOCK", id: doctor.IDMemlock, setup: func(t *testing.T, h *host) {
			write(t, filepath.Join(h.proc, "self/limits"), limits8MiB)
			write(t, filepath.Join(h.proc, "self/status"), statusNoIPCLock)
		}, want: doctor.Fail, msg: "limited to 8 MiB"},
		{name: "memlock unreadable", id: doctor.IDMemlock, setup: func(t *testing.T, h *host) {
			_ = os.Remove(filepath.Join(h.proc, "self/limits"))
		}, want: doctor.Warn, msg: "RLIMIT_MEMLOCK unknown"},
		{name: "memlock of another pid", id: doctor.IDMemlock, setup: func(t *testing.T, h *host) {
			write(t, filepath.Join(h.proc, "4242/limits"), limits8MiB)
			write(t, filepath.Join(h.proc, "4242/status"), statusNoIPCLock)
			write(t, filepath.Join(h.proc, "4242/net/route"), routeVia("eno1"))
			h.opts.PID = "4242"
		}, want: doctor.Fail, msg: "4242/limits"},

		{name: "IPC_LOCK effective", id: doctor.IDCapIPCLock, want: doctor.Pass, msg: "CAP_IPC_LOCK is effective"},
		{name: "IPC_LOCK missing", id: doctor.IDCapIPCLock, setup: func(t *testing.T, h *host) {
			write(t, filepath.Join(h.proc, "self/status"), statusNoIPCLock)
		}, want: doctor.Warn, msg: "registration works only while memlock stays unlimited"},

		{name: "default route on the management NIC", id: doctor.IDDefaultRoute, want: doctor.Pass, msg: "default route via eno1, not a training interface"},
		{name: "no default route", id: doctor.IDDefaultRoute, setup: func(t *testing.T, h *host) {
			write(t, filepath.Join(h.proc, "self/net/route"), routeVia())
		}, want: doctor.Pass, msg: "no default route"},
		{name: "default route on a VF netdev", id: doctor.IDDefaultRoute, setup: func(t *testing.T, h *host) {
			write(t, filepath.Join(h.proc, "self/net/route"), routeVia("enp65s0f0v0"))
		}, want: doctor.Fail, msg: "enp65s0f0v0 (netdev of the SR-IOV VF mlx5_4)"},
		{name: "default route on an NCCL_IB_HCA netdev", id: doctor.IDDefaultRoute, setup: func(t *testing.T, h *host) {
			write(t, filepath.Join(h.proc, "self/net/route"), routeVia("enp65s0f0np0"))
		}, want: doctor.Fail, msg: "selected by NCCL_IB_HCA==mlx5_1"},
		{name: "default route on --training-if", id: doctor.IDDefaultRoute, setup: func(t *testing.T, h *host) {
			h.opts.TrainingIfs = []string{"eno1"}
		}, want: doctor.Fail, msg: "eno1 (named by --training-if)"},
		{name: "default route on an RDMA NIC NCCL will use", id: doctor.IDDefaultRoute, setup: env("NCCL_IB_HCA", "<unset>"), want: doctor.Warn, msg: "RDMA device mlx5_0 NCCL will also use"},

		{name: "IB transport on", id: doctor.IDNCCLTransport, want: doctor.Pass, msg: "NCCL_IB_DISABLE=0"},
		{name: "IB disabled although devices exist", id: doctor.IDNCCLTransport, setup: env("NCCL_IB_DISABLE", "1"), want: doctor.Warn, msg: "NCCL uses TCP sockets although 28 RDMA device(s) exist"},
		{name: "NCCL_NET=Socket", id: doctor.IDNCCLTransport, setup: env("NCCL_NET", "Socket"), want: doctor.Warn, msg: "NCCL_NET=Socket"},
		{name: "NCCL_NET=IB without devices", id: doctor.IDNCCLTransport, empty: true, setup: chain(noRDMA, env("NCCL_NET", "IB")), want: doctor.Fail, msg: "NCCL_NET=IB but no RDMA device"},
		{name: "silent socket fallback", id: doctor.IDNCCLTransport, empty: true, setup: noRDMA, want: doctor.Warn, msg: "falls back to TCP sockets silently"},

		{name: "NCCL_IB_HCA exact", id: doctor.IDNCCLIBHCA, want: doctor.Pass, msg: "NCCL_IB_HCA==mlx5_1 selects mlx5_1"},
		{name: "NCCL_IB_HCA with port", id: doctor.IDNCCLIBHCA, setup: env("NCCL_IB_HCA", "=mlx5_1:1,mlx5_2:1"), want: doctor.Pass, msg: "selects mlx5_1, mlx5_2"},
		{name: "NCCL_IB_HCA exclusion", id: doctor.IDNCCLIBHCA, setup: env("NCCL_IB_HCA", "^mlx5_0", "NCCL_IB_GID_INDEX", "<unset>"), want: doctor.Pass, msg: "selects mlx5_1, mlx5_2, mlx5_3"},
		{name: "NCCL_IB_HCA unset", id: doctor.IDNCCLIBHCA, setup: env("NCCL_IB_HCA", "<unset>"), want: doctor.Pass, msg: "unset: NCCL uses every visible device"},
		{name: "NCCL_IB_HCA prefix selects more than meant", id: doctor.IDNCCLIBHCA, setup: env("NCCL_IB_HCA", "mlx5_1,mlx5_2"), want: doctor.Warn, msg: "mlx5_1 also selects mlx5_10, mlx5_11"},
		{name: "NCCL_IB_HCA names a netdev", id: doctor.IDNCCLIBHCA, setup: env("NCCL_IB_HCA", "enp65s0f0np0"), want: doctor.Fail, msg: "names network interface(s) enp65s0f0np0"},
		{name: "NCCL_IB_HCA selects nothing", id: doctor.IDNCCLIBHCA, setup: env("NCCL_IB_HCA", "=mlx5_99"), want: doctor.Fail, msg: "selects none of the visible RDMA devices"},
		{name: "NCCL_IB_HCA port that does not exist", id: doctor.IDNCCLIBHCA, setup: env("NCCL_IB_HCA", "=mlx5_1:2"), want: doctor.Fail, msg: "port 2 of mlx5_1"},
		{name: "NCCL_IB_HCA selects a down port", fresh: true, id: doctor.IDNCCLIBHCA, setup: func(t *testing.T, h *host) {
			if err := h.node.SetPortState("mlx5_1", "1: DOWN"); err != nil {
				t.Fatal(err)
			}
		}, want: doctor.Warn, msg: "mlx5_1 port 1 (DOWN)"},

		{name: "NCCL_SOCKET_IFNAME exists", id: doctor.IDNCCLSocketIf, want: doctor.Pass, msg: "NCCL_SOCKET_IFNAME=enp65s0f0np0 selects enp65s0f0np0"},
		{name: "NCCL_SOCKET_IFNAME exclusion", id: doctor.IDNCCLSocketIf, setup: env("NCCL_SOCKET_IFNAME", "^eno,enp65s0f0v"), want: doctor.Pass, msg: "selects enp65s0f0np0, ens1f0, ens8f0np0"},
		{name: "NCCL_SOCKET_IFNAME unset", id: doctor.IDNCCLSocketIf, setup: env("NCCL_SOCKET_IFNAME", "<unset>"), want: doctor.Pass, msg: "unset"},
		{name: "NCCL_SOCKET_IFNAME missing interface", id: doctor.IDNCCLSocketIf, setup: env("NCCL_SOCKET_IFNAME", "=net1"), want: doctor.Fail, msg: "NCCL_SOCKET_IFNAME==net1 selects no interface here"},

		{name: "whereabouts not checked", id: doctor.IDWhereabouts, want: doctor.Pass, msg: "not checked"},
		{name: "no whereabouts binary", id: doctor.IDWhereabouts, setup: func(t *testing.T, h *host) {
			h.opts.CNIBinDir = filepath.Join(h.root, "opt/cni/bin")
		}, want: doctor.Pass, msg: "no whereabouts binary in"},
		{name: "another project's whereabouts", id: doctor.IDWhereabouts, setup: func(t *testing.T, h *host) {
			h.opts.CNIBinDir = filepath.Join(h.root, "opt/cni/bin")
			write(t, filepath.Join(h.opts.CNIBinDir, "whereabouts"), "#!/bin/sh\nexec /usr/bin/whereabouts-real\n")
		}, want: doctor.Warn, msg: "whereabouts is not rdmanet's (not a Go binary"},
		{name: "fallbacks not checked", id: doctor.IDCNIFallbacks, want: doctor.Pass, msg: "not checked"},
		{name: "thin binaries with their fallbacks", id: doctor.IDCNIFallbacks, setup: cniBins(true), want: doctor.Pass, msg: "has its -direct binary"},
		{name: "thin binaries without their fallbacks", id: doctor.IDCNIFallbacks, setup: cniBins(false), want: doctor.Fail,
			msg: "rdmanet-ipam without rdmanet-ipam-direct, sriov without sriov-direct, whereabouts without rdmanet-ipam-direct"},
		{name: "NCCL_SOCKET_IFNAME names an RDMA device", id: doctor.IDNCCLSocketIf, setup: env("NCCL_SOCKET_IFNAME", "mlx5_1"), want: doctor.Fail, msg: "names the RDMA device mlx5_1"},
		{name: "NCCL_SOCKET_IFNAME interface down", fresh: true, id: doctor.IDNCCLSocketIf, setup: func(t *testing.T, h *host) {
			if err := h.node.SetOperState("enp65s0f0np0", "down"); err != nil {
				t.Fatal(err)
			}
		}, want: doctor.Fail, msg: "none of which is up"},

		{name: "NCCL_IB_GID_INDEX right", id: doctor.IDNCCLGIDIndex, want: doctor.Pass, msg: "NCCL_IB_GID_INDEX=3 is the RoCEv2 IPv4 index of mlx5_1 port 1"},
		{name: "NCCL_IB_GID_INDEX unset", id: doctor.IDNCCLGIDIndex, setup: env("NCCL_IB_GID_INDEX", "<unset>"), want: doctor.Pass, msg: "older NCCL needs NCCL_IB_GID_INDEX=3"},
		{name: "NCCL_IB_GID_INDEX on InfiniBand", id: doctor.IDNCCLGIDIndex, setup: env("NCCL_IB_HCA", "=mlx5_3"), want: doctor.Pass, msg: "ignored: no selected RoCE port"},
		{name: "NCCL_IB_GID_INDEX wrong (RoCE v2 link-local)", id: doctor.IDNCCLGIDIndex, setup: env("NCCL_IB_GID_INDEX", "1"), want: doctor.Fail, msg: "mlx5_1 port 1 has it at 3 (index 1 is RoCE v2, no IPv4"},
		{name: "NCCL_IB_GID_INDEX not a number", id: doctor.IDNCCLGIDIndex, setup: env("NCCL_IB_GID_INDEX", "three"), want: doctor.Fail, msg: "is not a GID index"},
		{name: "GID layouts differ across ports", fresh: true, id: doctor.IDNCCLGIDIndex, setup: func(t *testing.T, h *host) {
			env("NCCL_IB_HCA", "mlx5_1,mlx5_2", "NCCL_IB_GID_INDEX", "<unset>")(t, h)
			// mlx5_2's RoCEv2 IPv4 entry sits at index 5 (e.g. a second address came first)
			base := filepath.Join(h.sys, "class/infiniband/mlx5_2/ports/1")
			g, _ := os.ReadFile(filepath.Join(base, "gids/3"))
			write(t, filepath.Join(base, "gids/5"), string(g))
			write(t, filepath.Join(base, "gid_attrs/types/5"), "RoCE v2\n")
			write(t, filepath.Join(base, "gid_attrs/ndevs/5"), "ens8f0np0\n")
			write(t, filepath.Join(base, "gids/3"), "0000:0000:0000:0000:0000:0000:0000:0000\n")
		}, want: doctor.Warn, msg: "3 on mlx5_1 port 1; 5 on mlx5_2 port 1"},
	}
	covered := map[string]map[bool]bool{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var h *host
			if tc.empty {
				h = emptyHost(t)
			} else {
				h = newHost(t, tc.fresh)
			}
			if tc.setup != nil {
				tc.setup(t, h)
			}
			rep := h.run(t)
			msg := strings.ReplaceAll(tc.msg, "DEV/", h.dev+"/")
			var got []doctor.Check
			found := false
			for _, c := range rep.Checks {
				if c.ID != tc.id {
					continue
				}
				got = append(got, c)
				if c.Status == tc.want && strings.Contains(c.Message, msg) {
					found = true
				}
				if c.Status != doctor.Pass && c.Fix == "" {
					t.Errorf("%s %s without a fix: %s", c.ID, c.Status, c.Message)
				}
				if tc.want == doctor.Pass && c.Status != doctor.Pass && !tc.empty {
					t.Errorf("%s: want every check to pass, got %s: %s", c.ID, c.Status, c.Message)
				}
			}
			if !found {
				t.Errorf("no %s check with status %s and message containing %q; got:\n%s", tc.id, tc.want, msg, dump(got))
			}
		})
		if covered[tc.id] == nil {
			covered[tc.id] = map[bool]bool{}
		}
		covered[tc.id][tc.want == doctor.Pass] = true
	}
	for _, c := range doctor.Catalogue {
		if !covered[c.ID][true] || !covered[c.ID][false] {
			t.Errorf("check %s lacks a passing or a failing/warning case (have %v)", c.ID, covered[c.ID])
		}
	}
}

func dump(cs []doctor.Check) string {
	var b strings.Builder
	for _, c := range cs {
		b.WriteString("  " + string(c.Status) + " " + c.Message + "\n")
	}
	return b.String()
}

// TestStandardNodePasses: the bundled node with a consistent host-mode
// environment passes every check.
func TestStandardNodePasses(t *testing.T) {
	rep := newHost(t, false).run(t)
	for _, c := range rep.Checks {
		if c.Status != doctor.Pass {
			t.Errorf("%s %s: %s", c.ID, c.Status, c.Message)
		}
	}
	ids := map[string]bool{}
	for _, c := range rep.Checks {
		ids[c.ID] = true
		if c.Section == "" {
			t.Errorf("%s has no section", c.ID)
		}
	}
	for _, c := range doctor.Catalogue {
		if !ids[c.ID] {
			t.Errorf("check %s not reported on the standard node", c.ID)
		}
	}
	if rep.Summary.Result != "pass" || rep.Summary.Fail+rep.Summary.Warn != 0 || rep.Summary.Pass != len(rep.Checks) {
		t.Errorf("summary %+v", rep.Summary)
	}
	if rep.Failed() {
		t.Error("Failed() on a passing report")
	}
}

func TestJSONShape(t *testing.T) {
	h := newHost(t, false)
	h.opts.NetnsMode = kernelErr
	rep := h.run(t)
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(buf.Bytes(), &top); err != nil {
		t.Fatal(err)
	}
	if got := keys(top); got != "checks,node,summary" {
		t.Fatalf("top-level keys %s", got)
	}
	var checks []map[string]any
	if err := json.Unmarshal(top["checks"], &checks); err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		if got := keys(c); got != "fix,id,message,section,status" {
			t.Fatalf("check keys %s", got)
		}
		switch c["status"] {
		case "pass", "warn", "fail":
		default:
			t.Errorf("status %v", c["status"])
		}
	}
	var sum map[string]any
	_ = json.Unmarshal(top["summary"], &sum)
	if got := keys(sum); got != "fail,pass,result,warn" {
		t.Fatalf("summary keys %s", got)
	}
	if sum["result"] != "warn" || sum["warn"] != 1.0 {
		t.Errorf("summary %v (netns mode unknown is the one warning)", sum)
	}
	var node struct {
		Mode    string `json:"rdma_netns_mode"`
		Ibdev   []doctor.IbdevLine
		Ib2     []map[string]any  `json:"ibdev2netdev"`
		GIDs    []doctor.GIDLine  `json:"gids"`
		SRIOV   []doctor.PFLine   `json:"sriov"`
		Dev     []string          `json:"dev_infiniband"`
		Env     map[string]string `json:"nccl_env"`
		CapLock *bool             `json:"cap_ipc_lock"`
	}
	if err := json.Unmarshal(top["node"], &node); err != nil {
		t.Fatal(err)
	}
	if node.Mode != "unknown" || len(node.Ib2) != 28 || len(node.SRIOV) != 2 || len(node.Dev) != 28 || node.CapLock == nil || !*node.CapLock {
		t.Errorf("node: mode %s, %d ibdev2netdev, %d sriov, %d dev, cap %v", node.Mode, len(node.Ib2), len(node.SRIOV), len(node.Dev), node.CapLock)
	}
	if _, ok := node.Env["PATH"]; ok || node.Env["NCCL_IB_HCA"] != "=mlx5_1" {
		t.Errorf("nccl_env %v: want only NCCL_* variables", node.Env)
	}
	first := node.Ib2[1]
	if first["device"] != "mlx5_1" || first["netdev"] != "enp65s0f0np0" || first["netdev_state"] != "Up" || first["port_state"] != "ACTIVE" || first["recommended_gid_index"] != 3.0 {
		t.Errorf("ibdev2netdev[1] = %v", first)
	}
	var v2 []doctor.GIDLine
	for _, g := range node.GIDs {
		if g.Device == "mlx5_1" && g.Type == "v2" && g.IPv4 != "" {
			v2 = append(v2, g)
		}
	}
	if len(v2) != 1 || v2[0].Index != 3 || v2[0].IPv4 != "10.0.1.100" || v2[0].Netdev != "enp65s0f0np0" {
		t.Errorf("show_gids of mlx5_1: %+v", v2)
	}
}

func keys[V any](m map[string]V) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

func TestText(t *testing.T) {
	h := newHost(t, true)
	if err := h.node.SetPortState("mlx5_1", "1: DOWN"); err != nil {
		t.Fatal(err)
	}
	rep := h.run(t)
	for _, tc := range []struct {
		name string
		opt  doctor.TextOptions
		want []string
		not  []string
	}{
		{name: "plain", want: []string{
			"mlx5_1 port 1 ==> enp65s0f0np0 (Up)  [RoCE DOWN, RoCEv2 IPv4 GID index 3]",
			"… and 24 SR-IOV VF device(s)",
			"mlx5_1  1     3      0000:0000:0000:0000:0000:ffff:0a00:0164  10.0.1.100",
			"\nLINK\n", "  FAIL  port-state ", "fix: check the cable",
			"FAIL: ",
		}, not: []string{"\x1b[", "mlx5_4 port 1"}},
		{name: "colour and VFs", opt: doctor.TextOptions{Color: true, VFs: true}, want: []string{"\x1b[31mFAIL\x1b[0m", "mlx5_4 port 1 ==> enp65s0f0v0 (Up)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := rep.WriteText(&buf, tc.opt); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("text lacks %q:\n%s", w, out)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(out, n) {
					t.Errorf("text has %q", n)
				}
			}
		})
	}
}

func TestParsers(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want map[string]string
		err  string
	}{
		{name: "env output", in: "NCCL_IB_HCA=mlx5_1\nPATH=/bin\n", want: map[string]string{"NCCL_IB_HCA": "mlx5_1", "PATH": "/bin"}},
		{name: "shell snippet", in: "# pod env\nexport NCCL_SOCKET_IFNAME=\"net1\"\n\nNCCL_IB_GID_INDEX='3'\n", want: map[string]string{"NCCL_SOCKET_IFNAME": "net1", "NCCL_IB_GID_INDEX": "3"}},
		{name: "proc environ", in: "NCCL_IB_HCA=mlx5_1\x00A=b=c\x00", want: map[string]string{"NCCL_IB_HCA": "mlx5_1", "A": "b=c"}},
		{name: "not KEY=VALUE", in: "NCCL_IB_HCA mlx5_1\n", err: "line 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := doctor.ParseEnvFile(strings.NewReader(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if keys(got) != keys(tc.want) {
				t.Fatalf("got %v", got)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
	for _, tc := range []struct {
		name      string
		in        string
		unlimited bool
		soft      uint64
		err       bool
	}{
		{name: "unlimited", in: limitsUnlimited, unlimited: true},
		{name: "8 MiB", in: limits8MiB, soft: 8 << 20},
		{name: "no line", in: "Limit Soft Hard Units\n", err: true},
		{name: "garbage", in: "Max locked memory  lots  lots  bytes\n", err: true},
	} {
		t.Run("limits "+tc.name, func(t *testing.T) {
			m, err := doctor.ParseLimits([]byte(tc.in))
			if (err != nil) != tc.err {
				t.Fatalf("err %v", err)
			}
			if !tc.err && (m.Unlimited != tc.unlimited || m.Soft != tc.soft || !m.Known) {
				t.Errorf("%+v", m)
			}
		})
	}
	c, err := doctor.ParseCapEff([]byte(statusIPCLock))
	if err != nil || !c.IPCLock() {
		t.Errorf("CapEff with IPC_LOCK: %+v %v", c, err)
	}
	c, err = doctor.ParseCapEff([]byte(statusNoIPCLock))
	if err != nil || c.IPCLock() {
		t.Errorf("CapEff without IPC_LOCK: %+v %v", c, err)
	}
}

func TestGatherUnreadableRoot(t *testing.T) {
	_, err := doctor.Gather(doctor.GatherOptions{SysfsRoot: filepath.Join(t.TempDir(), "nope")})
	if err == nil {
		t.Fatal("no error for a missing sysfs root")
	}
}

var (
	thinOnce sync.Once
	thinDir  string
	thinErr  error
)

// cniBins puts rdmanet's thin sriov and rdmanet-ipam (also as whereabouts),
// built once from this tree, into the host's CNI bin directory, with their
// -direct binaries when withDirect.
func cniBins(withDirect bool) func(t *testing.T, h *host) {
	return func(t *testing.T, h *host) {
		thinOnce.Do(func() {
			thinDir, thinErr = os.MkdirTemp("", "doctor-cni-")
			if thinErr == nil {
				thinErr = pluginbin.BuildWith(thinDir, pluginbin.Options{}, pluginbin.SRIOV, pluginbin.IPAM)
			}
		})
		if thinErr != nil {
			t.Fatal(thinErr)
		}
		h.opts.CNIBinDir = filepath.Join(h.root, "opt/cni/bin")
		files := []string{"sriov", "rdmanet-ipam"}
		if withDirect {
			files = append(files, "sriov-direct", "rdmanet-ipam-direct")
		}
		for _, f := range append(files, "whereabouts") {
			b, err := os.ReadFile(filepath.Join(thinDir, f))
			if err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(h.opts.CNIBinDir, f), string(b))
		}
	}
}
