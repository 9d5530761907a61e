package ipam

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1alpha1 "github.com/rdmanet/rdmanet/api/ipam/v1alpha1"
)

// gatedStore counts writes and, while gate is set, holds every Update until
// the gate is closed (entered says one is held).
type gatedStore struct {
	Store
	updates, creates atomic.Int32
	mu               sync.Mutex
	gate             chan struct{}
	entered          chan struct{}
}

func (s *gatedStore) Update(ctx context.Context, b *v1alpha1.IPAMBlock) (*v1alpha1.IPAMBlock, error) {
	s.updates.Add(1)
	s.mu.Lock()
	gate, entered := s.gate, s.entered
	s.mu.Unlock()
	if gate != nil {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-gate
	}
	return s.Store.Update(ctx, b)
}

func (s *gatedStore) Create(ctx context.Context, b *v1alpha1.IPAMBlock) (*v1alpha1.IPAMBlock, error) {
	s.creates.Add(1)
	return s.Store.Create(ctx, b)
}

func (s *gatedStore) close() {
	s.mu.Lock()
	close(s.gate)
	s.gate = nil
	s.mu.Unlock()
}

func testOwner(i int) Owner {
	return Owner{ContainerID: fmt.Sprintf("c%03d", i), IfName: "net1", PodNamespace: "ns", PodName: fmt.Sprintf("p%03d", i), PodUID: fmt.Sprintf("u%03d", i)}
}

// waitQueued waits until n requests wait in the batcher of (a, pool, r).
func waitQueued(t *testing.T, a *Allocator, pool Pool, r *Range, n int) {
	t.Helper()
	key := batchKey{stateDir: a.StateDir, node: a.Node, pool: pool.Key(), rng: rangeKey(r)}
	deadline := time.Now().Add(time.Minute)
	for {
		batchers.Lock()
		got := 0
		if b := batchers.m[key]; b != nil {
			got = len(b.queue)
		}
		batchers.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests queued, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestBatchedAllocations: calls that queue while the node's block write is
// in flight share the next write, and get what one-by-one calls would.
func TestBatchedAllocations(t *testing.T) {
	tests := []struct {
		name string
		ipam string
		// queued calls while the first write is held; cancel marks the
		// ones whose caller gives up before they are served
		queued  int
		cancel  map[int]bool
		repeat  bool  // the first owner's ADD is repeated among the queued
		updates int32 // 0: not checked
		creates int32
	}{
		{name: "fifteen new owners share one write", ipam: `{"range":"10.60.0.0/16","node_slice_size":"/26"}`, queued: 15, updates: 2, creates: 1},
		{name: "a caller that gave up is never written", ipam: `{"range":"10.60.0.0/16","node_slice_size":"/26"}`, queued: 6, cancel: map[int]bool{3: true}, updates: 2, creates: 1},
		{name: "a repeated ADD gets its address back", ipam: `{"range":"10.60.0.0/16","node_slice_size":"/26"}`, queued: 5, repeat: true, updates: 2, creates: 1},
		// /29 blocks hold 8 addresses: 2 used, 6 placed in the batch, the
		// other 4 claim a new block one by one
		// (updates not counted: how many the batch placed depends on where
		// the node's first block lies)
		{name: "overflow claims a new block one by one", ipam: `{"range":"10.60.0.0/16","node_slice_size":"/29"}`, queued: 10, creates: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(`{"cniVersion":"1.0.0","name":"t","ipam":`+tc.ipam+`}`), Env{})
			if err != nil {
				t.Fatal(err)
			}
			r := cfg.Ranges[0]
			pool := r.Pool(cfg.Network)
			dir := t.TempDir()
			store := &gatedStore{Store: &LocalStore{Dir: filepath.Join(dir, "store")}}
			a := &Allocator{Store: store, Node: "n1", Lock: &FileLock{Dir: filepath.Join(dir, "n1")}, StateDir: filepath.Join(dir, "n1")}
			ctx := context.Background()

			first, err := a.Allocate(ctx, cfg.Network, r, testOwner(0)) // claims the block
			if err != nil {
				t.Fatal(err)
			}
			store.mu.Lock()
			store.gate, store.entered = make(chan struct{}), make(chan struct{}, 1)
			store.mu.Unlock()
			type out struct {
				addr netip.Addr
				err  error
			}
			outs := make([]out, tc.queued+1)
			var wg sync.WaitGroup
			wg.Go(func() { outs[0].addr, outs[0].err = a.Allocate(ctx, cfg.Network, r, testOwner(1)) })
			<-store.entered // the write of owner 1 holds the node lock
			cancels := map[int]context.CancelFunc{}
			returned := map[int]chan struct{}{}
			for i := 1; i <= tc.queued; i++ {
				owner := testOwner(i + 1)
				if tc.repeat && i == 1 {
					owner = testOwner(0)
				}
				cctx, cancel := context.WithCancel(ctx)
				cancels[i] = cancel
				done := make(chan struct{})
				returned[i] = done
				wg.Go(func() {
					defer close(done)
					outs[i].addr, outs[i].err = a.Allocate(cctx, cfg.Network, r, owner)
				})
			}
			waitQueued(t, a, pool, r, tc.queued)
			for i := range tc.cancel {
				cancels[i]()
			}
			for i := range tc.cancel {
				<-returned[i] // the caller gave up before the write was released
			}
			store.close()
			wg.Wait()
			for _, c := range cancels {
				c()
			}

			held := map[netip.Addr]string{}
			blocks, err := store.List(ctx, pool, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range blocks {
				for k, al := range b.Spec.Allocations {
					held[netip.MustParseAddr(k)] = al.ContainerID
				}
			}
			seen := map[netip.Addr]bool{first: true}
			for i, o := range outs {
				owner := testOwner(i + 1)
				if tc.repeat && i == 1 {
					owner = testOwner(0)
				}
				switch {
				case tc.cancel[i]:
					if o.err == nil {
						t.Errorf("call %d: canceled caller got %s, want an error", i, o.addr)
					}
					for addr, c := range held {
						if c == owner.ContainerID {
							t.Errorf("call %d: canceled caller's owner %s holds %s in the store", i, c, addr)
						}
					}
					continue
				case o.err != nil:
					t.Errorf("call %d: %v", i, o.err)
					continue
				case tc.repeat && i == 1:
					if o.addr != first {
						t.Errorf("repeated ADD got %s, want %s", o.addr, first)
					}
					continue
				}
				if seen[o.addr] {
					t.Errorf("call %d: %s handed out twice", i, o.addr)
				}
				seen[o.addr] = true
				if held[o.addr] != owner.ContainerID {
					t.Errorf("call %d: store has %s held by %q, want %q", i, o.addr, held[o.addr], owner.ContainerID)
				}
			}
			if got := store.updates.Load(); tc.updates != 0 && got != tc.updates {
				t.Errorf("%d block updates, want %d", got, tc.updates)
			}
			if got := store.creates.Load(); got != tc.creates {
				t.Errorf("%d block creates, want %d", got, tc.creates)
			}
			// the leader goroutine ends after its last answer: wait for it
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
				batchers.Lock()
				left := len(batchers.m)
				batchers.Unlock()
				if left == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d batchers left a minute after the calls returned", left)
				}
			}
		})
	}
}
