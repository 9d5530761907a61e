package guidpool_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rdmanet/rdmanet/internal/guidpool"
	"github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/internal/ipam/gc"
	"github.com/rdmanet/rdmanet/test/apiserver"
)

func TestMain(m *testing.M) {
	code := m.Run()
	apiserver.StopShared()
	os.Exit(code)
}

// cluster is a gc.Cluster with the given live pods and nodes.
type cluster struct {
	pods  map[string]gc.Pod
	nodes map[string]bool
}

func (c cluster) Pods(context.Context) (map[string]gc.Pod, error) { return c.pods, nil }
func (c cluster) Nodes(context.Context) (map[string]bool, error)  { return c.nodes, nil }

func poolConfig(t *testing.T, name string, size int) *guidpool.Config {
	t.Helper()
	last := fmt.Sprintf("02:00:00:00:00:00:00:%02x", size)
	cfg, err := guidpool.Parse("test", []byte(fmt.Sprintf(`{"name":%q,"ranges":[{"start":"02:00:00:00:00:00:00:01","end":%q}],"blockSize":8}`, name, last)))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestPoolOnAPIServer: two nodes allocate concurrently from one GUID range on
// a real API server: every GUID distinct, a full range refused, a repeated
// ADD answered with the same GUID by a fresh process, DEL releases, and the
// IPAM GC frees the GUIDs of pods that are gone.
func TestPoolOnAPIServer(t *testing.T) {
	srv := apiserver.Shared(t)
	store, err := ipam.NewKubeStore(srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const size = 0x30 // 48 GUIDs, 24 per node
	cfg := poolConfig(t, fmt.Sprintf("conc-%d", time.Now().UnixNano()), size)
	dir := t.TempDir()
	nodes := map[string]*guidpool.Pool{}
	for _, n := range []string{"ib-node-a", "ib-node-b"} {
		c := *cfg
		c.Store.Path = filepath.Join(dir, n)
		nodes[n] = guidpool.New(&c, store, n)
	}
	owner := func(node string, i int) ipam.Owner {
		return ipam.Owner{ContainerID: fmt.Sprintf("%s-c%02d", node, i), IfName: "net1", PodNamespace: "ib-jobs", PodName: fmt.Sprintf("%s-p%02d", node, i), PodUID: fmt.Sprintf("uid-%s-%d", node, i)}
	}
	type out struct {
		owner ipam.Owner
		node  string
		guid  guidpool.GUID
		err   error
	}
	var mu sync.Mutex
	var outs []out
	var wg sync.WaitGroup
	for name, p := range nodes {
		for i := 0; i < size/2; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				o := owner(name, i)
				g, err := p.Allocate(ctx, o)
				mu.Lock()
				outs = append(outs, out{o, name, g, err})
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	seen := map[guidpool.GUID]string{}
	for _, o := range outs {
		if o.err != nil {
			t.Fatalf("%s: %v", o.owner.ContainerID, o.err)
		}
		if prev, dup := seen[o.guid]; dup {
			t.Errorf("GUID %s given to %s and %s", o.guid, prev, o.owner.ContainerID)
		}
		if o.guid < 0x0200000000000001 || o.guid > 0x0200000000000000+size {
			t.Errorf("GUID %s outside the range", o.guid)
		}
		seen[o.guid] = o.owner.ContainerID
	}
	if len(seen) != size {
		t.Fatalf("%d distinct GUIDs, want %d", len(seen), size)
	}
	// the range is full: the next pod is refused
	if _, err := nodes["ib-node-a"].Allocate(ctx, owner("ib-node-a", 99)); !errors.Is(err, ipam.ErrExhausted) {
		t.Fatalf("allocation from a full range: %v, want exhaustion", err)
	}
	// a restarted daemon (a fresh pool over the same store) answers a repeated ADD with the same GUID
	c := *cfg
	c.Store.Path = filepath.Join(dir, "ib-node-a")
	again := guidpool.New(&c, store, "ib-node-a")
	for _, o := range outs[:4] {
		g, err := again.Allocate(ctx, o.owner)
		if err != nil || g != o.guid {
			t.Fatalf("repeated ADD of %s after restart: %s %v, want %s", o.owner.ContainerID, g, err, o.guid)
		}
	}
	// DEL releases on node a; a pod of node b then gets a freed GUID
	live := map[string]gc.Pod{}
	for _, o := range outs {
		if o.node == "ib-node-a" {
			if err := nodes["ib-node-a"].Release(ctx, o.owner); err != nil {
				t.Fatal(err)
			}
			if _, err := nodes["ib-node-a"].Lookup(ctx, o.owner); !errors.Is(err, ipam.ErrNotFound) {
				t.Fatalf("GUID of %s after DEL: %v", o.owner.ContainerID, err)
			}
		} else {
			live[o.owner.PodNamespace+"/"+o.owner.PodName] = gc.Pod{UID: o.owner.PodUID}
		}
	}
	if err := nodes["ib-node-a"].Release(ctx, owner("ib-node-a", 0)); err != nil {
		t.Fatalf("repeated release: %v", err)
	}
	// GC: node b's pods still live keep their GUIDs; once gone, GC frees them
	nodesUp := map[string]bool{"ib-node-a": true, "ib-node-b": true}
	rep, err := gc.Run(ctx, gc.Options{Store: store, Cluster: cluster{live, nodesUp}, Network: cfg.Network, Grace: gc.NoGrace})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Released) != 0 {
		t.Fatalf("GC released %d GUIDs of live pods", len(rep.Released))
	}
	rep, err = gc.Run(ctx, gc.Options{Store: store, Cluster: cluster{map[string]gc.Pod{}, nodesUp}, Network: cfg.Network, Grace: gc.NoGrace})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Released) != size/2 {
		got := map[string]bool{}
		for _, r := range rep.Released {
			got[r.Holder.ContainerID] = true
		}
		for _, o := range outs {
			if o.node == "ib-node-b" && !got[o.owner.ContainerID] {
				t.Logf("not released by GC: %s %s", o.owner.ContainerID, o.guid)
			}
		}
		blocks, _ := store.List(ctx, ipam.Pool{}, "")
		for _, b := range blocks {
			if b.Spec.Network == cfg.Network {
				t.Logf("block %s node %s allocs %v", b.Spec.CIDR, b.Spec.Node, b.Spec.Allocations)
			}
		}
		t.Errorf("GC released %d GUIDs of gone pods, want %d", len(rep.Released), size/2)
	}
	for _, o := range outs {
		if _, err := nodes[o.node].Lookup(ctx, o.owner); !errors.Is(err, ipam.ErrNotFound) {
			t.Errorf("GUID of %s still allocated: %v", o.owner.ContainerID, err)
		}
	}
}
