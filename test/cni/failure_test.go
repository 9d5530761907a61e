package cni_test

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/internal/cni/rdma"
	"github.com/rdmanet/rdmanet/internal/cni/sriov"
	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/test/netnsutil"
)

// fullNAD is the seed NAD with every optional sriov field set, so that each
// ADD step changes something that DEL must undo.
var fullNAD = strings.Replace(seedNAD, `"vlan": 200,`,
	`"vlan": 200, "vlanQoS": 3, "mac": "02:aa:bb:cc:dd:01", "mtu": 9000, "link_state": "enable", "min_tx_rate": 100, "max_tx_rate": 10000,`, 1)

// TestCrashConsistency makes ADD fail right after each of its steps — by
// returning an error (the plugin's rollback runs) or by dying on the spot
// (nothing runs) — then runs DEL as the runtime would. Afterwards the VF
// netdev is back in the host namespace under its original name, MAC and MTU,
// the VF settings and the RDMA device are back, no cache or lock file
// remains and the IPAM address is released.
func TestCrashConsistency(t *testing.T) {
	type point struct{ plugin, step string }
	var points []point
	for _, s := range sriov.Steps {
		points = append(points, point{"sriov", s})
	}
	for _, s := range rdma.Steps {
		points = append(points, point{"rdma", s})
	}
	for _, p := range points {
		for _, exit := range []bool{false, true} {
			mode := "error"
			if exit {
				mode = "exit"
			}
			t.Run(fmt.Sprintf("%s after %s, %s", p.plugin, p.step, mode), func(t *testing.T) {
				n := newNode(t, 2)
				const i = 1
				pod := netnsutil.NewNS(t)
				l := confList(t, fullNAD, "1.0.0", vfBDF(i))
				r := rt(i, pod)
				fault := p.plugin + ":" + p.step
				if exit {
					fault += ":exit"
				}
				t.Setenv(netops.EnvFault, fault)
				_, err := n.add(l, r)
				if err == nil {
					t.Fatalf("ADD with %s=%s succeeded", netops.EnvFault, fault)
				}
				if !exit && p.plugin == "sriov" {
					// sriov rolled itself back: the VF is as it was before DEL.
					n.assertRestored(t, i, containerID(i))
				}
				t.Setenv(netops.EnvFault, "")
				if err := n.del(l, r); err != nil {
					t.Fatalf("DEL after failed ADD (%v): %v", err, err)
				}
				n.assertRestored(t, i, containerID(i))
				if got := netnsutil.Links(t, pod); len(got) != 1 {
					t.Errorf("pod netns keeps %v, want only lo", got)
				}
			})
		}
	}
}

// TestDelNetnsGone deletes the pod netns before DEL. A physical VF netdev
// returns to the host namespace under the pod's ifname when its namespace is
// destroyed; a veth would be destroyed instead, so the harness performs that
// return (ReturnToHost) before deleting the namespace.
func TestDelNetnsGone(t *testing.T) {
	for _, tc := range []struct {
		name   string
		netnsf string // what DEL gets as CNI_NETNS
	}{
		{name: "netns path still passed", netnsf: "path"},
		{name: "netns empty", netnsf: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, 2)
			const i = 0
			pod := netnsutil.NewNS(t)
			l := confList(t, seedNAD, "1.1.0", vfBDF(i))
			r := rt(i, pod)
			if _, err := n.add(l, r); err != nil {
				t.Fatalf("ADD: %v", err)
			}
			netnsutil.ReturnToHost(t, pod, n.host, "net1")
			netnsutil.DeleteNS(t, pod)
			if tc.netnsf == "" {
				r.NetNS = ""
			}
			if err := n.del(l, r); err != nil {
				t.Fatalf("DEL: %v", err)
			}
			n.assertRestored(t, i, containerID(i))
		})
	}
}

// TestDelWithoutCache: DEL for an attachment nothing knows about (never
// added, or already deleted) succeeds and touches no VF.
func TestDelWithoutCache(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deviceID string
	}{
		{name: "deviceID injected", deviceID: vfBDF(1)},
		{name: "no deviceID (NAD or pool gone)", deviceID: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, 2)
			pod := netnsutil.NewNS(t)
			if err := n.del(confList(t, seedNAD, "1.0.0", tc.deviceID), rt(1, pod)); err != nil {
				t.Fatalf("DEL: %v", err)
			}
			n.assertRestored(t, 1, containerID(1))
			if log, _ := n.rec.Log(); len(log) != 1 { // only the node's "rdma system set netns exclusive"
				t.Errorf("DEL without cache touched the NIC: %v", log)
			}
		})
	}
}

// TestAddRejectsBadConfig: bad values are rejected before anything is
// touched, with errors naming the field, the value, the rule and the fix.
func TestAddRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name     string
		patch    func(string) string
		deviceID string
		want     []string
	}{
		{name: "vlan 4095", patch: func(s string) string { return strings.Replace(s, `"vlan": 200`, `"vlan": 4095`, 1) },
			deviceID: vfBDF(0), want: []string{`"vlan"`, "4095", "0-4094"}},
		{name: "trust maybe", patch: func(s string) string { return strings.Replace(s, `"trust": "off"`, `"trust": "maybe"`, 1) },
			deviceID: vfBDF(0), want: []string{`"trust"`, `"maybe"`, `"on" or "off"`}},
		{name: "deviceID is the PF", patch: func(s string) string { return s },
			deviceID: pfBDF, want: []string{`"deviceID"`, pfBDF, "must be an SR-IOV VF"}},
		{name: "deviceID missing", patch: func(s string) string { return s },
			deviceID: "", want: []string{`"deviceID"`, "k8s.v1.cni.cncf.io/resourceName", "does not match the device plugin pool"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, 1)
			pod := netnsutil.NewNS(t)
			_, err := n.add(confList(t, tc.patch(seedNAD), "1.0.0", tc.deviceID), rt(0, pod))
			if err == nil {
				t.Fatal("ADD succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if log, _ := n.rec.Log(); len(log) != 1 {
				t.Errorf("rejected ADD touched the NIC: %v", log)
			}
			n.assertRestored(t, 0, containerID(0))
		})
	}
}

// TestRDMASharedModeRejected: with the RDMA subsystem in shared mode the
// rdma step fails with the seed's fix, and DEL undoes the sriov step.
func TestRDMASharedModeRejected(t *testing.T) {
	n := newNode(t, 1)
	if err := n.rec.SetNetnsMode(netops.RDMANetnsShared); err != nil {
		t.Fatal(err)
	}
	pod := netnsutil.NewNS(t)
	l := confList(t, seedNAD, "1.0.0", vfBDF(0))
	_, err := n.add(l, rt(0, pod))
	if err == nil || !strings.Contains(err.Error(), "rdma system set netns exclusive") {
		t.Fatalf("ADD error %v, want the fix `rdma system set netns exclusive`", err)
	}
	if err := n.del(l, rt(0, pod)); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	n.assertRestored(t, 0, containerID(0))
}

// TestRDMANeedsPrevResult: the rdma plugin alone (not chained) is refused.
func TestRDMANeedsPrevResult(t *testing.T) {
	n := newNode(t, 1)
	pod := netnsutil.NewNS(t)
	l := confList(t, `{"cniVersion":"1.0.0","name":"rdma-alone","plugins":[{"type":"rdma"}]}`, "1.0.0", vfBDF(0))
	_, err := n.add(l, rt(0, pod))
	if err == nil || !strings.Contains(err.Error(), "chained after") {
		t.Fatalf("ADD error %v, want a prevResult error", err)
	}
	if home, _ := n.rec.RDMAHome(n.rdmaDev(t, 0)); !home {
		t.Error("RDMA device moved")
	}
}

// TestConcurrentAdds runs many parallel ADDs over a pool of VFs with random
// deviceIDs (as a broken device plugin might hand out): no VF is ever in two
// pods, and the losers fail with "VF in use by <container>".
func TestConcurrentAdds(t *testing.T) {
	const vfs, pods = 4, 16
	n := newNode(t, vfs)
	rng := rand.New(rand.NewSource(1))
	type attempt struct {
		vf  int
		pod ns.NetNS
		l   *libcni.NetworkConfigList
		err error
	}
	as := make([]*attempt, pods)
	for p := range as {
		vf := rng.Intn(vfs)
		as[p] = &attempt{vf: vf, pod: netnsutil.NewNS(t), l: confList(t, seedNAD, "1.0.0", vfBDF(vf))}
	}
	var wg sync.WaitGroup
	for p, a := range as {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, a.err = n.add(a.l, rt(p, a.pod))
		}()
	}
	wg.Wait()
	winners := map[int]int{} // vf -> pod
	for p, a := range as {
		if a.err == nil {
			if w, dup := winners[a.vf]; dup {
				t.Errorf("VF %d attached to pods %d and %d", a.vf, w, p)
			}
			winners[a.vf] = p
			n.assertAttached(t, a.vf, a.pod)
			continue
		}
		if !strings.Contains(a.err.Error(), "in use by container") {
			t.Errorf("pod %d (VF %d) failed with %v, want \"VF in use by container ...\"", p, a.vf, a.err)
		}
	}
	for vf := range vfs {
		asked := false
		for _, a := range as {
			asked = asked || a.vf == vf
		}
		if _, ok := winners[vf]; asked && !ok {
			t.Errorf("VF %d was asked for but nobody got it", vf)
		}
	}
	for p, a := range as {
		if a.err != nil {
			if _, ok := netnsutil.Link(t, a.pod, "net1"); ok {
				t.Errorf("losing pod %d has a net1", p)
			}
		}
	}
	// The runtime deletes every sandbox, losers first here: their DEL names
	// a VF another pod holds and must leave it alone.
	for p, a := range as {
		if a.err != nil {
			if err := n.del(a.l, rt(p, a.pod)); err != nil {
				t.Errorf("DEL losing pod %d: %v", p, err)
			}
		}
	}
	for vf, p := range winners {
		n.assertAttached(t, vf, as[p].pod)
	}
	for p, a := range as {
		if a.err == nil {
			if err := n.del(a.l, rt(p, a.pod)); err != nil {
				t.Errorf("DEL pod %d: %v", p, err)
			}
		}
	}
	for vf, p := range winners {
		n.assertRestored(t, vf, containerID(p))
	}
	if al := n.allocations(t); len(al) != 0 {
		t.Errorf("IPAM keeps %v", al)
	}
}

// TestAddReclaimsVFOfGoneSandbox (found by the soak): a sandbox's DEL left
// its VF pending (the VF was still in its netns), the runtime destroyed
// that netns (the kernel returned the VF netdev to the host), and kubelet
// gives the pod's next sandbox the same VF. ADD finishes the old sandbox's
// teardown — VF settings, RDMA device and the old address released — and
// attaches. While the old netns exists, the VF stays in use.
func TestAddReclaimsVFOfGoneSandbox(t *testing.T) {
	n := newNode(t, 2)
	const i = 0
	l := confList(t, seedNAD, "1.0.0", vfBDF(i))
	old := netnsutil.NewNS(t)
	oldRT := rt(i, old)
	if _, err := n.add(l, oldRT); err != nil {
		t.Fatalf("first ADD: %v", err)
	}
	oldIPs := n.allocations(t)[containerID(i)]
	if len(oldIPs) != 1 {
		t.Fatalf("first sandbox holds %v, want one address", oldIPs)
	}
	next := netnsutil.NewNS(t)
	nextRT := rt(i, next)
	nextRT.ContainerID = "c0ffee-next"
	// the old sandbox lives: the VF is in use
	if _, err := n.add(l, nextRT); err == nil || !strings.Contains(err.Error(), "in use by container "+containerID(i)) {
		t.Fatalf("ADD while the old sandbox lives: %v, want the VF in use by %s", err, containerID(i))
	}
	n.assertAttached(t, i, old)
	// the old sandbox dies without a DEL that finished
	netnsutil.ReturnToHost(t, old, n.host, "net1")
	netnsutil.DeleteNS(t, old)
	if _, err := n.add(l, nextRT); err != nil {
		t.Fatalf("ADD after the old sandbox's netns is gone: %v", err)
	}
	n.assertAttached(t, i, next)
	if ips := n.allocations(t)[containerID(i)]; len(ips) != 0 {
		t.Errorf("the gone sandbox still holds %v", ips)
	}
	// the pending DEL of the old sandbox, retried later, finds nothing to do
	if err := n.del(l, oldRT); err != nil {
		t.Fatalf("late DEL of the gone sandbox: %v", err)
	}
	n.assertAttached(t, i, next)
	if err := n.del(l, nextRT); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	n.assertRestored(t, i, "c0ffee-next")
}

// TestDelNetnsGoneTwoVFsBack (found by the soak): two pods' namespaces are
// destroyed before their DELs; the kernel returns both VFs to the host, the
// first as "net1", the second as "dev<N>" (the name is taken). Each DEL
// must restore its own VF — the "net1" in the host is the other pod's — so
// both VFs end up under their own names with their own MACs.
func TestDelNetnsGoneTwoVFsBack(t *testing.T) {
	for _, order := range [][]int{{1, 0}, {0, 1}} {
		t.Run(fmt.Sprintf("DEL order %v", order), func(t *testing.T) {
			n := newNode(t, 2)
			var pods []ns.NetNS
			var rts []*libcni.RuntimeConf
			var ls []*libcni.NetworkConfigList
			for i := 0; i < 2; i++ {
				pod := netnsutil.NewNS(t)
				l := confList(t, seedNAD, "1.0.0", vfBDF(i))
				r := rt(i, pod)
				if _, err := n.add(l, r); err != nil {
					t.Fatalf("ADD %d: %v", i, err)
				}
				pods, rts, ls = append(pods, pod), append(rts, r), append(ls, l)
			}
			// VF 0 comes back as net1; VF 1 finds the name taken
			netnsutil.ReturnToHost(t, pods[0], n.host, "net1")
			netnsutil.Do(t, pods[1], func() error {
				if err := netops.SetLinkDown("net1"); err != nil {
					return err
				}
				return netops.RenameLink("net1", "dev77")
			})
			netnsutil.ReturnToHost(t, pods[1], n.host, "dev77")
			for _, p := range pods {
				netnsutil.DeleteNS(t, p)
			}
			for _, i := range order {
				if err := n.del(ls[i], rts[i]); err != nil {
					t.Fatalf("DEL %d: %v", i, err)
				}
			}
			for i := 0; i < 2; i++ {
				n.assertRestored(t, i, containerID(i))
			}
		})
	}
}

// TestCutShortRecordWritesCleared: a record write that a read-only or full
// file system cut short between creating and renaming its temporary file
// leaves that file behind (the soak's state-readonly fault found one). The
// next ADD of the VF and its DEL hold the VF's lock, so they remove such
// files of its records whatever their age: after ADD and DEL nothing is left.
func TestCutShortRecordWritesCleared(t *testing.T) {
	for _, tc := range []struct {
		name string
		add  bool
	}{
		{name: "the next ADD and DEL of the VF", add: true},
		{name: "the DEL of the failed ADD (no record)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, 2)
			const i = 1
			for _, plugin := range []string{"sriov", "rdma"} {
				dir := filepath.Join(n.stateDir, plugin)
				if err := os.MkdirAll(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				// what fsutil.WriteFileAtomic's os.CreateTemp names it
				if err := os.WriteFile(filepath.Join(dir, "."+vfBDF(i)+".json.tmp123456"), []byte(`{"containerID":"cut-short"}`), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			pod := netnsutil.NewNS(t)
			l, r := confList(t, seedNAD, "1.0.0", vfBDF(i)), rt(i, pod)
			if tc.add {
				if _, err := n.add(l, r); err != nil {
					t.Fatalf("ADD: %v", err)
				}
				n.assertAttached(t, i, pod)
			}
			if err := n.del(l, r); err != nil {
				t.Fatalf("DEL: %v", err)
			}
			n.assertRestored(t, i, containerID(i))
		})
	}
}
