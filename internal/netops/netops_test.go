package netops_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
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
	if err := r.SetNetnsMode(netops.RDMANetnsExclusive); err != nil {
		t.Fatal(err)
	}
	if err := r.Move("mlx5_4", host, pod); err != nil {
		t.Fatal(err)
	}
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

// TestNetlinkKernelPath runs the kernel implementation where the kernel can
// answer, and skips with the reason where this machine lacks the feature.
func TestNetlinkKernelPath(t *testing.T) {
	netnsutil.RequireRoot(t)
	t.Run("VF configuration through a PF", func(t *testing.T) {
		n := netnsutil.NewNS(t)
		netnsutil.AddVeth(t, n, "pf0", nil, "pf0-peer", n)
		var err error
		netnsutil.Do(t, n, func() error { _, err = netops.Netlink{}.VFState("pf0", 0); return nil })
		if err == nil {
			t.Fatal("a veth reported VF 0")
		}
		t.Skipf("kernel VF configuration needs an SR-IOV PF; a veth stands in here and the kernel answers: %v", err)
	})
	t.Run("RDMA netns mode", func(t *testing.T) {
		mode, err := netops.Netlink{}.NetnsMode()
		if err != nil {
			t.Skipf("no kernel RDMA subsystem on this machine: %v", err)
		}
		if mode != netops.RDMANetnsExclusive && mode != netops.RDMANetnsShared {
			t.Errorf("netns mode %q", mode)
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
