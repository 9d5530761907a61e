package netops_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/test/netnsutil"
)

func TestRecorderVF(t *testing.T) {
	r := netops.NewRecorder(filepath.Join(t.TempDir(), "nic.json"))
	st, err := r.VFState("pf0", 3)
	if err != nil || st != netops.DefaultVFState() {
		t.Fatalf("unseen VF = %+v, %v; want the default state", st, err)
	}
	mac, _ := net.ParseMAC("02:00:00:00:00:07")
	for _, op := range []func() error{
		func() error { return r.SetVFMAC("pf0", 3, mac) },
		func() error { return r.SetVFVlan("pf0", 3, 200, 3, netops.Proto8021ad) },
		func() error { return r.SetVFSpoofchk("pf0", 3, false) },
		func() error { return r.SetVFTrust("pf0", 3, true) },
		func() error { return r.SetVFLinkState("pf0", 3, netops.LinkStateDisable) },
		func() error { return r.SetVFRate("pf0", 3, 100, 1000) },
	} {
		if err := op(); err != nil {
			t.Fatal(err)
		}
	}
	// A second recorder on the same file (another plugin process) sees it.
	st, err = netops.NewRecorder(r.StatePath()).VFState("pf0", 3)
	want := netops.VFState{MAC: "02:00:00:00:00:07", Vlan: 200, QoS: 3, Proto: netops.Proto8021ad, Spoofchk: false, Trust: true,
		LinkState: netops.LinkStateDisable, MinTxRate: 100, MaxTxRate: 1000}
	if err != nil || st != want {
		t.Fatalf("state = %+v, %v; want %+v", st, err, want)
	}
	if other, _ := r.VFState("pf0", 4); other != netops.DefaultVFState() {
		t.Errorf("VF 4 changed: %+v", other)
	}
	log, err := r.Log()
	if err != nil {
		t.Fatal(err)
	}
	wantLog := []string{
		"ip link set pf0 vf 3 mac 02:00:00:00:00:07",
		"ip link set pf0 vf 3 vlan 200 qos 3 proto 802.1ad",
		"ip link set pf0 vf 3 spoofchk off",
		"ip link set pf0 vf 3 trust on",
		"ip link set pf0 vf 3 state disable",
		"ip link set pf0 vf 3 min_tx_rate 100 max_tx_rate 1000",
	}
	if fmt.Sprint(log) != fmt.Sprint(wantLog) {
		t.Errorf("log:\n%v\nwant:\n%v", log, wantLog)
	}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{name: "bad proto", err: r.SetVFVlan("pf0", 3, 1, 0, "802.1x")},
		{name: "bad state", err: r.SetVFLinkState("pf0", 3, "up")},
		{name: "bad netns mode", err: r.SetNetnsMode("private")},
	} {
		if tc.err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
}

// TestRecorderConcurrentProcessesShareState: updates from many writers
// (each its own Recorder, as each plugin process is) are all kept.
func TestRecorderConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nic.json")
	var wg sync.WaitGroup
	for vf := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := netops.NewRecorder(path).SetVFVlan("pf0", vf, 100+vf, 0, ""); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	r := netops.NewRecorder(path)
	for vf := range 16 {
		if st, _ := r.VFState("pf0", vf); st.Vlan != 100+vf {
			t.Errorf("VF %d vlan %d, want %d (lost update)", vf, st.Vlan, 100+vf)
		}
	}
	if log, _ := r.Log(); len(log) != 16 {
		t.Errorf("log has %d lines, want 16", len(log))
	}
}

// TestRecorderRDMA follows an RDMA device into a pod netns, back, and home
// again when the pod netns is deleted (what exclusive mode does).
func TestRecorderRDMA(t *testing.T) {
	netnsutil.RequireRoot(t)
	host, pod := netnsutil.NewNS(t), netnsutil.NewNS(t)
	r := netops.NewRecorder(filepath.Join(t.TempDir(), "nic.json"))
	in := func(n ns.NetNS) bool {
		t.Helper()
		ok, err := r.InNetns("mlx5_4", n)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if err := r.Move("mlx5_4", host, pod); err == nil {
		t.Fatal("move in shared mode (the default) succeeded")
	}
	if !in(pod) || !in(host) {
		t.Fatal("shared mode: a device is not visible in every netns")
	}
	if err := r.SetNetnsMode(netops.RDMANetnsExclusive); err != nil {
		t.Fatal(err)
	}
	// exclusive mode: a device never moved is in the host netns, the one
	// the plugin processes run in, and in no pod's
	netnsutil.Do(t, host, func() error {
		if in(pod) {
			return errors.New("exclusive mode: a device never moved is visible in a pod netns")
		}
		if !in(host) {
			return errors.New("exclusive mode: a device never moved is not visible in the host netns")
		}
		if err := r.Move("mlx5_4", pod, host); !errors.Is(err, netops.ErrRDMANotFound) {
			return fmt.Errorf("moving a device never moved out of a pod netns: %v, want ErrRDMANotFound", err)
		}
		return r.Move("mlx5_4", host, pod)
	})
	if !in(pod) || in(host) {
		t.Fatalf("after move: in pod %v, in host %v", in(pod), in(host))
	}
	if err := r.Move("mlx5_4", host, pod); !errors.Is(err, netops.ErrRDMANotFound) {
		t.Errorf("moving from a netns the device is not in: %v, want ErrRDMANotFound", err)
	}
	if err := r.Move("mlx5_4", pod, host); err != nil {
		t.Fatal(err)
	}
	if in(pod) || !in(host) {
		t.Fatalf("after move back: in pod %v, in host %v", in(pod), in(host))
	}
	if err := r.Move("mlx5_4", host, pod); err != nil {
		t.Fatal(err)
	}
	netnsutil.DeleteNS(t, pod)
	if home, _ := r.RDMAHome("mlx5_4"); !home || !in(host) {
		t.Errorf("device not home after its netns was deleted")
	}
}

func TestFileLockMutualExclusion(t *testing.T) {
	dir := t.TempDir()
	lockPath, counter := filepath.Join(dir, "vf.lock"), filepath.Join(dir, "n")
	const workers, iters = 8, 25
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range iters {
				lk, err := netops.LockFile(lockPath)
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := os.ReadFile(counter)
				v, _ := strconv.Atoi(string(b))
				if err := os.WriteFile(counter, []byte(strconv.Itoa(v+1)), 0o600); err != nil {
					t.Error(err)
				}
				// Removing the file on unlock must not let two holders in.
				if err := lk.UnlockAndRemove(); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	b, _ := os.ReadFile(counter)
	if string(b) != strconv.Itoa(workers*iters) {
		t.Errorf("counter %s, want %d: two holders overlapped", b, workers*iters)
	}
	if _, err := os.Stat(lockPath); !os.IsNotExist(err) {
		t.Errorf("lock file left behind: %v", err)
	}
}

func TestFailpoint(t *testing.T) {
	for _, tc := range []struct {
		name, env, plugin, step string
		wantErr                 bool
	}{
		{name: "addressed step", env: "sriov:move", plugin: "sriov", step: "move", wantErr: true},
		{name: "other step", env: "sriov:move", plugin: "sriov", step: "cache"},
		{name: "other plugin", env: "rdma:move", plugin: "sriov", step: "move"},
		{name: "unset", env: "", plugin: "sriov", step: "move"},
		{name: "malformed", env: "sriov", plugin: "sriov", step: "move"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fp := netops.FailpointFromEnv(func(string) string { return tc.env }, tc.plugin)
			if err := fp.Hit(tc.step); (err != nil) != tc.wantErr {
				t.Errorf("Hit(%s) = %v, want error %v", tc.step, err, tc.wantErr)
			}
		})
	}
}

func TestFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		record  bool
		wantErr bool
	}{
		{name: "default is the kernel", env: map[string]string{}},
		{name: "netlink", env: map[string]string{netops.EnvImpl: "netlink"}},
		{name: "record", env: map[string]string{netops.EnvImpl: "record", netops.EnvState: "/tmp/x.json"}, record: true},
		{name: "record without state", env: map[string]string{netops.EnvImpl: "record"}, wantErr: true},
		{name: "unknown", env: map[string]string{netops.EnvImpl: "ioctl"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops, err := netops.FromEnv(func(k string) string { return tc.env[k] })
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			_, isRec := ops.VF.(*netops.Recorder)
			if isRec != tc.record {
				t.Errorf("VF implementation %T", ops.VF)
			}
		})
	}
}

// TestNetlinkKernelPath runs the kernel implementation (netops.Netlink)
// against this machine's kernel and never skips. CI has no SR-IOV PF and no
// RDMA subsystem, so it checks the answers such a kernel gives, which are
// well defined: every VF setter sent through a veth standing in for the PF
// passes the kernel's netlink validation and reaches its VF handler, which
// refuses it with EOPNOTSUPP (a malformed IFLA_VFINFO_LIST would get EINVAL
// or ERANGE instead); VFState finds no VF (ErrNoVF); a missing PF is
// ErrLinkNotFound; the RDMA netlink family is absent (EPROTONOSUPPORT), or
// on a machine with RDMA reports a valid netns mode. The successful path
// through a real PF needs SR-IOV hardware (docs/cni.md); the recording fake
// covers the plugins' use of it.
func TestNetlinkKernelPath(t *testing.T) {
	netnsutil.RequireRoot(t)
	t.Run("VF configuration through a PF", func(t *testing.T) {
		n := netnsutil.NewNS(t)
		netnsutil.AddVeth(t, n, "pf0", nil, "pf0-peer", n)
		mac, _ := net.ParseMAC("02:00:00:00:02:01")
		k := netops.Netlink{}
		tests := []struct {
			name    string
			call    func() error
			wantErr error
			wantCmd string
		}{
			{name: "VFState", call: func() error { _, err := k.VFState("pf0", 0); return err }, wantErr: netops.ErrNoVF, wantCmd: "ip link show pf0"},
			{name: "mac", call: func() error { return k.SetVFMAC("pf0", 0, mac) }, wantErr: syscall.EOPNOTSUPP, wantCmd: "ip link set pf0 vf 0 mac 02:00:00:00:02:01"},
			{name: "vlan 802.1Q", call: func() error { return k.SetVFVlan("pf0", 0, 200, 3, netops.Proto8021Q) }, wantErr: syscall.EOPNOTSUPP, wantCmd: "ip link set pf0 vf 0 vlan 200 qos 3 proto 802.1Q"},
			{name: "vlan 802.1ad", call: func() error { return k.SetVFVlan("pf0", 1, 300, 0, netops.Proto8021ad) }, wantErr: syscall.EOPNOTSUPP, wantCmd: "vf 1 vlan 300 qos 0 proto 802.1ad"},
			{name: "spoofchk", call: func() error { return k.SetVFSpoofchk("pf0", 0, false) }, wantErr: syscall.EOPNOTSUPP, wantCmd: "spoofchk off"},
			{name: "trust", call: func() error { return k.SetVFTrust("pf0", 0, true) }, wantErr: syscall.EOPNOTSUPP, wantCmd: "trust on"},
			{name: "link state", call: func() error { return k.SetVFLinkState("pf0", 0, netops.LinkStateEnable) }, wantErr: syscall.EOPNOTSUPP, wantCmd: "state enable"},
			{name: "rate", call: func() error { return k.SetVFRate("pf0", 0, 100, 1000) }, wantErr: syscall.EOPNOTSUPP, wantCmd: "min_tx_rate 100 max_tx_rate 1000"},
			{name: "bad VLAN protocol refused before the kernel", call: func() error { return k.SetVFVlan("pf0", 0, 200, 0, "802.1x") }, wantCmd: `VLAN protocol "802.1x"`},
			{name: "missing PF", call: func() error { return k.SetVFTrust("nopf", 0, true) }, wantErr: netops.ErrLinkNotFound, wantCmd: "nopf"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				var err error
				netnsutil.Do(t, n, func() error { err = tc.call(); return nil })
				if err == nil {
					t.Fatal("the kernel accepted VF configuration through a veth")
				}
				if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
					t.Errorf("error %v, want it to wrap %v", err, tc.wantErr)
				}
				if !strings.Contains(err.Error(), tc.wantCmd) {
					t.Errorf("error %q does not name %q", err, tc.wantCmd)
				}
			})
		}
	})
	t.Run("RDMA subsystem", func(t *testing.T) {
		host, pod := netnsutil.NewNS(t), netnsutil.NewNS(t)
		k := netops.Netlink{}
		mode, err := k.NetnsMode()
		if err == nil {
			if mode != netops.RDMANetnsExclusive && mode != netops.RDMANetnsShared {
				t.Errorf("netns mode %q", mode)
			}
			if in, err := k.InNetns("rdmanet-no-such-dev", host); err != nil || in {
				t.Errorf("InNetns of a missing device: %v, %v", in, err)
			}
			if err := k.Move("rdmanet-no-such-dev", host, pod); !errors.Is(err, netops.ErrRDMANotFound) {
				t.Errorf("Move of a missing device: %v, want ErrRDMANotFound", err)
			}
			return
		}
		t.Logf("no RDMA subsystem: %v", err)
		if !errors.Is(err, syscall.EPROTONOSUPPORT) || !strings.Contains(err.Error(), "rdma system") {
			t.Errorf("NetnsMode error %v, want `rdma system` wrapping EPROTONOSUPPORT (no RDMA netlink family)", err)
		}
		if _, err := k.InNetns("mlx5_0", host); !errors.Is(err, syscall.EPROTONOSUPPORT) {
			t.Errorf("InNetns error %v, want EPROTONOSUPPORT", err)
		}
		if err := k.Move("mlx5_0", host, pod); !errors.Is(err, syscall.EPROTONOSUPPORT) || !strings.Contains(err.Error(), "rdma dev show mlx5_0") {
			t.Errorf("Move error %v, want `rdma dev show mlx5_0` wrapping EPROTONOSUPPORT", err)
		}
	})
	t.Run("link operations", func(t *testing.T) {
		host, pod := netnsutil.NewNS(t), netnsutil.NewNS(t)
		mac, _ := net.ParseMAC("02:00:00:00:01:01")
		netnsutil.AddVeth(t, host, "vf0", mac, "vf0-peer", host)
		netnsutil.Do(t, host, func() error {
			if err := netops.SetLinkNetns("vf0", pod); err != nil {
				return err
			}
			if _, err := netops.LinkByName("vf0"); !errors.Is(err, netops.ErrLinkNotFound) {
				return fmt.Errorf("vf0 still in host: %v", err)
			}
			return nil
		})
		netnsutil.Do(t, pod, func() error {
			if err := netops.RenameLink("vf0", "net1"); err != nil {
				return err
			}
			if err := netops.SetLinkMTU("net1", 4000); err != nil {
				return err
			}
			if err := netops.SetLinkUp("net1"); err != nil {
				return err
			}
			l, err := netops.LinkByMAC(mac)
			if err != nil {
				return err
			}
			if l.Name != "net1" || l.MTU != 4000 || !l.Up {
				return fmt.Errorf("link %+v", l)
			}
			return nil
		})
	})
}

// TestLowerLinks runs the netlink resolver against real stacked links: a
// bridge's ports, a macvlan's parent, recursively; a veth's peer is not a
// lower device; unknown names are skipped.
func TestLowerLinks(t *testing.T) {
	netnsutil.RequireRoot(t)
	n := netnsutil.NewNS(t)
	netnsutil.AddVeth(t, n, "p0", nil, "p0-peer", n)
	netnsutil.AddVeth(t, n, "p1", nil, "p1-peer", n)
	netnsutil.Do(t, n, func() error {
		if err := netops.AddBridge("br0"); err != nil {
			return err
		}
		for _, p := range []string{"p0", "p1"} {
			if err := netops.SetLinkMaster(p, "br0"); err != nil {
				return err
			}
		}
		if err := netops.AddMacvlan("mv-br", "br0"); err != nil {
			return err
		}
		return netops.AddMacvlan("mv-peer", "p0-peer")
	})
	tests := []struct {
		name  string
		names []string
		want  []string
	}{
		{name: "bridge ports", names: []string{"br0"}, want: []string{"p0", "p1"}},
		{name: "macvlan over a bridge: the bridge and its ports", names: []string{"mv-br"}, want: []string{"br0", "p0", "p1"}},
		{name: "macvlan over a veth end", names: []string{"mv-peer"}, want: []string{"p0-peer"}},
		{name: "a veth's peer is not below it", names: []string{"p0"}, want: nil},
		{name: "names given are not repeated", names: []string{"br0", "p0"}, want: []string{"p1"}},
		{name: "unknown netdev", names: []string{"bond7"}, want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			netnsutil.Do(t, n, func() error {
				var err error
				got, err = netops.LowerLinks(tc.names...)
				return err
			})
			sort.Strings(got)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("LowerLinks(%v) = %v, want %v", tc.names, got, tc.want)
			}
		})
	}
}
