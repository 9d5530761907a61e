package sim

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rdmanet/rdmanet/internal/guidpool"
	rdmaipam "github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

func TestNodeForAndResources(t *testing.T) {
	tests := []struct {
		mode, wantNode string
		def            nodeDef
		wantResources  string
	}{
		{mode: ModeExclusive, wantNode: NodeExclusive, def: nodeDef{Mode: netops.RDMANetnsExclusive}, wantResources: ExclusiveResource},
		{mode: ModeShared, wantNode: NodeShared, def: nodeDef{Mode: netops.RDMANetnsShared}, wantResources: SharedResource},
		{mode: ModeHost, wantNode: NodeShared, def: nodeDef{Mode: netops.RDMANetnsShared}, wantResources: SharedResource},
		{mode: ModeIBExclusive, wantNode: NodeIBExclusive, def: nodeDef{Mode: netops.RDMANetnsExclusive, IB: true}, wantResources: IBExclusiveResource},
		{mode: ModeIBShared, wantNode: NodeIBShared, def: nodeDef{Mode: netops.RDMANetnsShared, IB: true}, wantResources: IBSharedResource},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			if got := nodeFor(tc.mode); got != tc.wantNode {
				t.Errorf("nodeFor(%s) = %s, want %s", tc.mode, got, tc.wantNode)
			}
			if got := strings.Join(tc.def.resources(), ","); got != tc.wantResources {
				t.Errorf("resources %s, want %s", got, tc.wantResources)
			}
		})
	}
}

// TestIBNetdevsMatchTheFixture: every netdev the IB node's sysfs names
// has its stand-in veth (named alike), so the plugins find the VFs' IPoIB
// netdevs and the shared port where sysfs says they are.
func TestIBNetdevsMatchTheFixture(t *testing.T) {
	d := nodeDef{Name: NodeIBExclusive, VFs: 3, IB: true}
	fix, err := d.buildIBFixture(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, n := range d.netdevs() {
		have[n.name] = true
	}
	for bdf, nd := range fix.NetByBDF {
		if nd != "" && !have[nd] {
			t.Errorf("sysfs names netdev %s (%s), the node has no stand-in for it", nd, bdf)
		}
	}
	if len(fix.Port0VFs) != 3 || fix.NetByBDF[fix.Port0VFs[2]] != IBVFNetdev(2) || fix.Port0.BDF != IBExclusivePortBDF || fix.Port1.BDF != IBSharedPortBDF || fix.Port1.Netdev != IBSharedPort {
		t.Errorf("fixture %+v %+v %v", fix.Port0, fix.Port1, fix.Port0VFs)
	}
}

// TestIBVFStateNormalisesTheFreshGUID: the host comparison treats a fresh
// VF's zero GUID and the all-ones GUID DEL sets back as the same (no
// leak), and anything else as a change; driver rebinds are no state.
func TestIBVFStateNormalisesTheFreshGUID(t *testing.T) {
	guid := func(s string) net.HardwareAddr {
		hw, err := net.ParseMAC(s)
		if err != nil {
			t.Fatal(err)
		}
		return hw
	}
	tests := []struct {
		name    string
		do      func(r *netops.Recorder) error
		changed bool
	}{
		{name: "untouched", do: func(*netops.Recorder) error { return nil }},
		{name: "GUID set back to all ones and rebound (DEL of a fresh VF)", do: func(r *netops.Recorder) error {
			for _, f := range []func(string, int, net.HardwareAddr) error{r.SetVFNodeGUID, r.SetVFPortGUID} {
				if err := f(IBExclusivePort, 0, guid("02:00:00:00:00:00:00:01")); err != nil {
					return err
				}
				if err := f(IBExclusivePort, 0, guid("ff:ff:ff:ff:ff:ff:ff:ff")); err != nil {
					return err
				}
			}
			return r.RebindVF("", "0000:c1:00.2", "mlx5_core")
		}},
		{name: "pool GUID left on the VF", changed: true, do: func(r *netops.Recorder) error {
			return r.SetVFPortGUID(IBExclusivePort, 0, guid("02:00:00:00:00:00:00:01"))
		}},
		{name: "link state left", changed: true, do: func(r *netops.Recorder) error {
			return r.SetVFLinkState(IBExclusivePort, 0, "enable")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := netops.NewRecorder(filepath.Join(t.TempDir(), "netops.json"))
			before, err := ibVFState(rec, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.do(rec); err != nil {
				t.Fatal(err)
			}
			after, err := ibVFState(rec, 0)
			if err != nil {
				t.Fatal(err)
			}
			if (before != after) != tc.changed {
				t.Errorf("before %q, after %q; want changed=%v", before, after, tc.changed)
			}
		})
	}
}

// TestCheckIBRelease: after DEL the demo verifies, per ib-sriov pod, that
// its VF carries no GUID and that the node's GUID pool (the real pool over
// its local store) has the pod's GUID free again; what is not given back
// is named.
func TestCheckIBRelease(t *testing.T) {
	tests := []struct {
		name        string
		vfGUID      string // set on VF 0 after "DEL" ("" = none)
		keepInPool  bool
		want        string // problem substring; "" = none
		wantRelease bool
	}{
		{name: "given back", vfGUID: "ff:ff:ff:ff:ff:ff:ff:ff", wantRelease: true},
		{name: "GUID still allocated in the pool", vfGUID: "ff:ff:ff:ff:ff:ff:ff:ff", keepInPool: true, want: "still allocated in the GUID pool after DEL"},
		{name: "GUID left on the VF", vfGUID: "02:00:00:00:00:00:00:05", want: "VF 0000:c1:00.2 of pod ai-training/ib-trainer-0 still has GUID 02:00:00:00:00:00:00:05 after DEL", wantRelease: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := layout{WorkDir: t.TempDir()}
			d := nodeDef{Name: NodeIBExclusive, IB: true}
			b, err := d.guidPoolConfig(l)
			if err != nil {
				t.Fatal(err)
			}
			if err := writeFileMkdir(d.guidPoolConfigPath(l), b); err != nil {
				t.Fatal(err)
			}
			cfg, err := guidpool.Parse("demo", b)
			if err != nil || cfg.Store.Type != rdmaipam.StoreLocal || !strings.HasPrefix(cfg.Store.Path, l.nodeDir(d.Name)) {
				t.Fatalf("pool config %+v: %v", cfg, err)
			}
			pool, err := d.openGUIDPool(l)
			if err != nil {
				t.Fatal(err)
			}
			owner := rdmaipam.Owner{ContainerID: "c0", IfName: "net1"}
			g, err := pool.Allocate(context.Background(), owner)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.keepInPool {
				if err := pool.Release(context.Background(), owner); err != nil {
					t.Fatal(err)
				}
			}
			rec := netops.NewRecorder(filepath.Join(l.nodeDir(d.Name), "netops.json"))
			hw, _ := net.ParseMAC(tc.vfGUID)
			if err := rec.SetVFPortGUID(IBExclusivePort, 0, hw); err != nil {
				t.Fatal(err)
			}
			n := &node{def: d, l: l, rec: rec, ib: &sysfsfixture.IBNode{Port0VFs: []string{"0000:c1:00.2"}}}
			r := &podRun{mode: ModeIBExclusive, node: n, pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ai-training", Name: "ib-trainer-0"}},
				rep: PodReport{ContainerID: "c0", InfiniBand: &IBReport{VF: "0000:c1:00.2", GUID: g.String()}}}
			problems := checkIBRelease([]*podRun{r})
			got := strings.Join(problems, "; ")
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Fatalf("problems %q, want %q", got, tc.want)
			}
			if rel := r.rep.InfiniBand.PoolReleased; rel == nil || *rel != tc.wantRelease {
				t.Errorf("PoolReleased %v, want %v", rel, tc.wantRelease)
			}
			if r.rep.InfiniBand.GUIDAfterDel != tc.vfGUID {
				t.Errorf("GUIDAfterDel %q, want %q", r.rep.InfiniBand.GUIDAfterDel, tc.vfGUID)
			}
		})
	}
}

func TestUniqueGUIDs(t *testing.T) {
	run := func(name, guid string) *podRun {
		return &podRun{mode: ModeIBExclusive, pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ai-training", Name: name}},
			rep: PodReport{InfiniBand: &IBReport{GUID: guid}}}
	}
	tests := []struct {
		name string
		runs []*podRun
		want string
	}{
		{name: "distinct", runs: []*podRun{run("a", "02:00:00:00:00:00:00:01"), run("b", "02:00:00:00:00:00:00:02")}},
		{name: "one GUID twice", runs: []*podRun{run("a", "02:00:00:00:00:00:00:01"), run("b", "02:00:00:00:00:00:00:01")},
			want: "GUID 02:00:00:00:00:00:00:01 was given to 2 pods: ai-training/a, ai-training/b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.Join(uniqueGUIDs(tc.runs), "; "); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestWriteTableInfiniBand: the table shows each ib-sriov pod's GUID and
// PKey and what DEL left, each IPoIB pod's parent and PKey, and says
// whether the GUIDs were unique and came back.
func TestWriteTableInfiniBand(t *testing.T) {
	yes, no := true, false
	excl := func(name, guid string, released *bool) PodReport {
		return PodReport{Namespace: "ai-training", Name: name, Mode: ModeIBExclusive, RDMA: "mlx5_4 moved into the pod netns (recorded)",
			Interfaces: []Interface{{Name: "net1", IPs: []string{"10.61.1.2/16"}}},
			InfiniBand: &IBReport{Plugin: "ib-sriov", GUID: guid, GUIDSource: "GUID pool", PKey: "0x8005", VF: "0000:c1:00.2",
				GUIDAfterDel: "ff:ff:ff:ff:ff:ff:ff:ff", PoolReleased: released, Recorded: []string{"ip link set ibp193s0f0 vf 0 node_guid " + guid}}}
	}
	shared := PodReport{Namespace: "ai-training", Name: "ipoib-trainer-0", Mode: ModeIBShared,
		Interfaces: []Interface{{Name: "net1", IPs: []string{"10.62.1.2/16"}}},
		InfiniBand: &IBReport{Plugin: "ipoib", Parent: IBSharedPort, Mode: "datagram", PKey: "0xffff", PortGUID: "0c:42:a1:03:00:65:8e:82",
			Recorded: []string{"ip link add ipoib1 link ibp193s0f1 type ipoib pkey 0xffff mode datagram umcast 1"}}}
	tests := []struct {
		name string
		pods []PodReport
		want []string
	}{
		{name: "unique and given back", pods: []PodReport{excl("ib-trainer-0", "02:00:00:00:00:00:00:01", &yes), excl("ib-trainer-1", "02:00:00:00:00:00:00:02", &yes), shared},
			want: []string{"02:00:00:00:00:00:00:01 (pool)", "02:00:00:00:00:00:00:02 (pool)", "0x8005", "VF GUID ff:ff:ff:ff:ff:ff:ff:ff, free in the pool",
				"IPoIB child of ibp193s0f1 (datagram mode)", "0xffff (the port's)", "2 ib-sriov pods, 2 distinct (unique)", "every GUID is free in the pool again",
				"recorded for ai-training/ib-trainer-0", "type ipoib pkey 0xffff"}},
		{name: "duplicate", pods: []PodReport{excl("ib-trainer-0", "02:00:00:00:00:00:00:01", &yes), excl("ib-trainer-1", "02:00:00:00:00:00:00:01", &yes)},
			want: []string{"2 ib-sriov pods, 1 distinct (DUPLICATES)"}},
		{name: "not given back", pods: []PodReport{excl("ib-trainer-0", "02:00:00:00:00:00:00:01", &no)},
			want: []string{"STILL ALLOCATED in the pool", "after DEL 0 of 1 GUIDs are free in the pool"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := WriteTable(&b, &Report{Pods: tc.pods, Cleanup: "clean"}); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("table lacks %q:\n%s", w, b.String())
				}
			}
		})
	}
}

func writeFileMkdir(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
