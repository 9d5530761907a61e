package gc_test

import (
	"bytes"
	"context"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

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
	alloc := func(node string) *ipam.Allocator {
		return &ipam.Allocator{Store: store, Node: node, Lock: &ipam.FileLock{Dir: filepath.Join(t.TempDir(), node)}}
	}
	a, b := alloc("node-a"), alloc("node-b")
	must := func(al *ipam.Allocator, o ipam.Owner) netip.Addr {
		t.Helper()
		addr, err := al.Allocate(ctx, cfg.Network, r, o)
		if err != nil {
			t.Fatal(err)
		}
		return addr
	}
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

	dry, err := gc.Run(ctx, gc.Options{Store: store, Cluster: cluster, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(ipamtest.StoreAllocations(t, ctx, store, pool)); n != 9 {
		t.Fatalf("dry run changed the store: %d allocations left, want 9", n)
	}

	rep, err := gc.Run(ctx, gc.Options{Store: store, Cluster: cluster})
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
	again, err := gc.Run(ctx, gc.Options{Store: store, Cluster: cluster})
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
