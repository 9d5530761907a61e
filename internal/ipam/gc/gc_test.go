package gc_test

import (
	"bytes"
	"context"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/internal/ipam/gc"
	"github.com/rdmanet/rdmanet/internal/ipam/ipamtest"
)

func TestRun(t *testing.T) {
	ctx := context.Background()
	cfg, err := ipam.Parse([]byte(`{"cniVersion":"1.0.0","name":"t","ipam":{"range":"10.90.0.0/24","node_slice_size":"/28"}}`), ipam.Env{})
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Ranges[0]
	pool := ipam.Pool{Network: cfg.Network, Prefix: r.Prefix}
	store := &ipam.LocalStore{Dir: t.TempDir()}
	clock := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	alloc := func(node string) *ipam.Allocator {
		return &ipam.Allocator{Store: store, Node: node, Lock: &ipam.FileLock{Dir: filepath.Join(t.TempDir(), node)}, Now: func() time.Time { return clock }}
	}
	a, b := alloc("node-a"), alloc("node-b")
	must := func(al *ipam.Allocator, o ipam.Owner) netip.Addr {
		t.Helper()
		clock = clock.Add(time.Second)
		addr, err := al.Allocate(ctx, cfg.Network, r, o)
		if err != nil {
			t.Fatal(err)
		}
		return addr
	}
	// GC runs an hour after the allocations: all are past the grace period.
	later := func() time.Time { return clock.Add(time.Hour) }
	live := ipamtest.Owner("node-a", 1)
	gone := ipamtest.Owner("node-a", 2)
	recreated := ipamtest.Owner("node-a", 3) // same name, new UID below
	done := ipamtest.Owner("node-a", 4)
	noPod := ipam.Owner{ContainerID: "raw-1", IfName: "net1"} // not a Kubernetes pod
	staleSandbox := ipamtest.Owner("node-a", 5)
	currentSandbox := staleSandbox
	currentSandbox.ContainerID += "-retry"
	onDeadNode := ipamtest.Owner("node-b", 1)
	noPodDeadNode := ipam.Owner{ContainerID: "raw-2", IfName: "net1"}

	liveAddr := must(a, live)
	must(a, gone)
	must(a, recreated)
	must(a, done)
	noPodAddr := must(a, noPod)
	must(a, staleSandbox)
	currentAddr := must(a, currentSandbox)
	must(b, onDeadNode)
	must(b, noPodDeadNode)

	cluster := &ipamtest.Cluster{
		PodsByKey: map[string]gc.Pod{
			"ns/" + live.PodName:           {UID: live.PodUID},
			"ns/" + recreated.PodName:      {UID: "new-uid"},
			"ns/" + done.PodName:           {UID: done.PodUID, Terminal: true},
			"ns/" + currentSandbox.PodName: {UID: currentSandbox.PodUID, IPs: map[netip.Addr]bool{currentAddr: true}},
		},
		NodeNames: map[string]bool{"node-a": true},
	}

	dry, err := gc.Run(ctx, gc.Options{Store: store, Cluster: cluster, DryRun: true, Now: later})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(ipamtest.StoreAllocations(t, ctx, store, pool)); n != 9 {
		t.Fatalf("dry run changed the store: %d allocations left, want 9", n)
	}

	rep, err := gc.Run(ctx, gc.Options{Store: store, Cluster: cluster, Now: later})
	if err != nil {
		t.Fatal(err)
	}
	if len(dry.Released) != len(rep.Released) {
		t.Errorf("dry run reported %d releases, real run %d", len(dry.Released), len(rep.Released))
	}
	reasons := map[string]string{}
	for _, rel := range rep.Released {
		reasons[rel.Holder.ContainerID] = rel.Reason
	}
	want := map[string]string{
		gone.ContainerID:          gc.ReasonPodGone,
		recreated.ContainerID:     gc.ReasonPodReplaced,
		done.ContainerID:          gc.ReasonPodDone,
		staleSandbox.ContainerID:  gc.ReasonStale,
		onDeadNode.ContainerID:    gc.ReasonPodGone,
		noPodDeadNode.ContainerID: gc.ReasonNodeGone,
	}
	for id, reason := range want {
		if reasons[id] != reason {
			t.Errorf("%s: released with %q, want %q", id, reasons[id], reason)
		}
	}
	if len(reasons) != len(want) {
		t.Errorf("released %v, want exactly %v", reasons, want)
	}
	left := ipamtest.StoreAllocations(t, ctx, store, pool)
	if len(left) != 3 || left[liveAddr].ContainerID != live.ContainerID || left[noPodAddr].ContainerID != noPod.ContainerID || left[currentAddr].ContainerID != currentSandbox.ContainerID {
		t.Errorf("store after GC = %v, want the live pod, the pod-less allocation on a live node and the current sandbox", left)
	}
	if len(rep.DeletedBlocks) != 1 || !strings.Contains(rep.DeletedBlocks[0], "default-") {
		t.Errorf("deleted blocks %v, want node-b's one block", rep.DeletedBlocks)
	}
	blocks, _ := store.List(ctx, pool, "node-b")
	if len(blocks) != 0 {
		t.Errorf("node-b still has %d blocks", len(blocks))
	}
	var out bytes.Buffer
	gc.PrintReport(&out, rep, false)
	if !strings.Contains(out.String(), "ipam-gc: blocks=2 allocations=9 released=6 kept=3 deleted_blocks=1") {
		t.Errorf("report:\n%s", out.String())
	}

	// A second run finds nothing to do.
	again, err := gc.Run(ctx, gc.Options{Store: store, Cluster: cluster, Now: later})
	if err != nil || len(again.Released) != 0 || len(again.DeletedBlocks) != 0 {
		t.Errorf("second run: %+v %v", again, err)
	}
}

func TestMainUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := gc.Main([]string{}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "-kubeconfig is required") {
		t.Errorf("code %d, stderr %q", code, errOut.String())
	}
}

// TestRunSlowStatus (issue 13, defect 8): a pod's network-status is written
// after ADD returns, so GC must not decide from it. A pod's interface held by
// two sandboxes keeps the newest sandbox's address whatever the status says;
// the older one goes only once it is past the grace period and no status
// lists it; nothing younger than the grace period is released.
func TestRunSlowStatus(t *testing.T) {
	ctx := context.Background()
	cfg, err := ipam.Parse([]byte(`{"cniVersion":"1.0.0","name":"t","ipam":{"range":"10.91.0.0/24"}}`), ipam.Env{})
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Ranges[0]
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	type alloc struct {
		sandbox string
		at      time.Duration // after t0
		pod     string        // "" = the test pod
	}
	tests := []struct {
		name   string
		allocs []alloc
		// status lists the addresses of these sandboxes (nil: not written yet).
		status []string
		// listed: the pod is in the pod list (false: not visible yet).
		unlisted bool
		gcAt     time.Duration
		grace    time.Duration
		want     []string // sandboxes whose addresses remain
		young    int
	}{
		{name: "new sandbox allocated, status still lists the old one", allocs: []alloc{{"s1", 0, ""}, {"s2", 30 * time.Minute, ""}},
			status: []string{"s1"}, gcAt: 31 * time.Minute, want: []string{"s1", "s2"}},
		{name: "new sandbox allocated long ago, status still lists the old one", allocs: []alloc{{"s1", 0, ""}, {"s2", 30 * time.Minute, ""}},
			status: []string{"s1"}, gcAt: 3 * time.Hour, want: []string{"s1", "s2"}},
		{name: "status not written yet, old sandbox past grace", allocs: []alloc{{"s1", 0, ""}, {"s2", 30 * time.Minute, ""}},
			gcAt: 31 * time.Minute, want: []string{"s2"}},
		{name: "status lists the new sandbox", allocs: []alloc{{"s1", 0, ""}, {"s2", 30 * time.Minute, ""}},
			status: []string{"s2"}, gcAt: 31 * time.Minute, want: []string{"s2"}},
		{name: "old sandbox within grace", allocs: []alloc{{"s1", 25 * time.Minute, ""}, {"s2", 30 * time.Minute, ""}},
			status: []string{"s2"}, gcAt: 31 * time.Minute, want: []string{"s1", "s2"}, young: 1},
		{name: "only sandbox, status not written", allocs: []alloc{{"s1", 0, ""}}, gcAt: 3 * time.Hour, want: []string{"s1"}},
		{name: "pod not listed yet, allocation young", allocs: []alloc{{"s1", 0, ""}}, unlisted: true, gcAt: time.Minute, want: []string{"s1"}, young: 1},
		{name: "pod gone, allocation past grace", allocs: []alloc{{"s1", 0, ""}}, unlisted: true, gcAt: time.Hour, want: nil},
		{name: "no grace period", allocs: []alloc{{"s1", 0, ""}}, unlisted: true, gcAt: time.Second, grace: gc.NoGrace, want: nil},
		{name: "custom grace", allocs: []alloc{{"s1", 0, ""}}, unlisted: true, gcAt: time.Hour, grace: 2 * time.Hour, want: []string{"s1"}, young: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store := &ipam.LocalStore{Dir: t.TempDir()}
			var now time.Time
			a := &ipam.Allocator{Store: store, Node: "node-a", Lock: &ipam.FileLock{Dir: t.TempDir()}, Now: func() time.Time { return now }}
			addrs := map[string]netip.Addr{}
			for _, al := range tc.allocs {
				now = t0.Add(al.at)
				o := ipam.Owner{ContainerID: al.sandbox, IfName: "net1", PodNamespace: "ns", PodName: "train-0", PodUID: "uid-1"}
				addr, err := a.Allocate(ctx, cfg.Network, r, o)
				if err != nil {
					t.Fatal(err)
				}
				addrs[al.sandbox] = addr
			}
			pod := gc.Pod{UID: "uid-1"}
			if tc.status != nil {
				pod.IPs = map[netip.Addr]bool{}
				for _, s := range tc.status {
					pod.IPs[addrs[s]] = true
				}
			}
			cluster := &ipamtest.Cluster{PodsByKey: map[string]gc.Pod{"ns/train-0": pod}, NodeNames: map[string]bool{"node-a": true}}
			if tc.unlisted {
				cluster.PodsByKey = nil
			}
			rep, err := gc.Run(ctx, gc.Options{Store: store, Cluster: cluster, Grace: tc.grace, Now: func() time.Time { return t0.Add(tc.gcAt) }})
			if err != nil {
				t.Fatal(err)
			}
			left := ipamtest.StoreAllocations(t, ctx, store, cfg.Pool(r))
			var got []string
			for _, al := range tc.allocs {
				if left[addrs[al.sandbox]].ContainerID == al.sandbox {
					got = append(got, al.sandbox)
				}
			}
			if !slices.Equal(got, tc.want) || rep.Young != tc.young {
				t.Errorf("kept sandboxes %v (young %d), want %v (young %d); released %+v", got, rep.Young, tc.want, tc.young, rep.Released)
			}
		})
	}
}

// TestRunKeepsReservations: a gateway reservation survives GC, also in a
// block of a node that is gone (so that block is not deleted).
func TestRunKeepsReservations(t *testing.T) {
	ctx := context.Background()
	cfg, err := ipam.Parse([]byte(`{"cniVersion":"1.0.0","name":"t","ipam":{"range":"10.92.0.0/24","gateway":"10.92.0.1"}}`), ipam.Env{})
	if err != nil {
		t.Fatal(err)
	}
	store := &ipam.LocalStore{Dir: t.TempDir()}
	a := &ipam.Allocator{Store: store, Node: "gone-node", Lock: &ipam.FileLock{Dir: t.TempDir()}}
	if _, err := a.Allocate(ctx, cfg.Network, cfg.Ranges[0], ipamtest.Owner("gone-node", 1)); err != nil {
		t.Fatal(err)
	}
	rep, err := gc.Run(ctx, gc.Options{Store: store, Cluster: &ipamtest.Cluster{}, Grace: gc.NoGrace})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Reserved != 1 || len(rep.Released) != 1 || len(rep.DeletedBlocks) != 0 {
		t.Fatalf("report %+v, want the pod's address released, the reservation kept, no block deleted", rep)
	}
	blocks, _ := store.List(ctx, ipam.Pool{}, "")
	if len(blocks) == 0 || blocks[0].Spec.Allocations["10.92.0.1"].Reserved != ipam.ReservedGateway {
		t.Fatalf("blocks after GC %+v, want the gateway reservation", blocks)
	}
}
