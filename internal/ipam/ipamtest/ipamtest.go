// Package ipamtest holds store-independent checks of the IPAM allocator, run
// against the local store in unit tests and the kubernetes store on a real
// API server.
package ipamtest

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"

	v1alpha1 "github.com/rdmanet/rdmanet/api/ipam/v1alpha1"
	"github.com/rdmanet/rdmanet/internal/ipam"
)

// Outcome of one allocation.
type Outcome struct {
	Owner ipam.Owner
	Node  string
	Addr  netip.Addr
	Err   error
}

// AllocateMany makes perNode allocations on every node, with `workers`
// goroutines per node, and returns every outcome.
func AllocateMany(ctx context.Context, nodes []*ipam.Allocator, network string, r *ipam.Range, perNode, workers int) []Outcome {
	out := make([]Outcome, len(nodes)*perNode)
	var wg sync.WaitGroup
	for ni, a := range nodes {
		jobs := make(chan int)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range jobs {
					o := Owner(a.Node, j)
					addr, err := a.Allocate(ctx, network, r, o)
					out[ni*perNode+j] = Outcome{Owner: o, Node: a.Node, Addr: addr, Err: err}
				}
			}()
		}
		go func() {
			for j := range perNode {
				jobs <- j
			}
			close(jobs)
		}()
	}
	wg.Wait()
	return out
}

// Owner is the j-th synthetic owner of a node.
func Owner(node string, j int) ipam.Owner {
	return ipam.Owner{ContainerID: fmt.Sprintf("%s-c%05d", node, j), IfName: "net1",
		PodNamespace: "ns", PodName: fmt.Sprintf("%s-p%05d", node, j), PodUID: fmt.Sprintf("uid-%s-%05d", node, j)}
}

// StoreAllocations reads every pod allocation of the store, failing on an
// address held twice (in two blocks) or an allocation outside its block.
// Reservations (gateways) take part in those checks but are not returned.
// A zero pool reads every pool.
func StoreAllocations(t testing.TB, ctx context.Context, s ipam.Store, pool ipam.Pool) map[netip.Addr]v1alpha1.Allocation {
	t.Helper()
	blocks, err := s.List(ctx, pool, "")
	if err != nil {
		t.Fatalf("list blocks: %v", err)
	}
	out := map[netip.Addr]v1alpha1.Allocation{}
	all := map[netip.Addr]v1alpha1.Allocation{}
	var cidrs []netip.Prefix
	for _, b := range blocks {
		cidr := netip.MustParsePrefix(b.Spec.CIDR)
		for _, c := range cidrs {
			if c.Overlaps(cidr) {
				t.Errorf("blocks overlap: %s and %s", c, cidr)
			}
		}
		cidrs = append(cidrs, cidr)
		for k, a := range b.Spec.Allocations {
			addr := netip.MustParseAddr(k)
			if !cidr.Contains(addr) {
				t.Errorf("block %s holds %s outside its CIDR", b.Name, addr)
			}
			if prev, dup := all[addr]; dup {
				t.Errorf("address %s held twice: %+v and %+v", addr, prev, a)
			}
			all[addr] = a
			if a.Reserved == "" {
				out[addr] = a
			}
		}
	}
	return out
}

// CheckOutcomes verifies successful allocations are distinct, usable, and
// match the store exactly; it returns the failures.
func CheckOutcomes(t testing.TB, ctx context.Context, s ipam.Store, pool ipam.Pool, r *ipam.Range, outs []Outcome) []Outcome {
	t.Helper()
	seen := map[netip.Addr]ipam.Owner{}
	var failed []Outcome
	for _, o := range outs {
		if o.Err != nil {
			failed = append(failed, o)
			continue
		}
		if !r.Usable(o.Addr) {
			t.Errorf("%s got %s which is outside the range or excluded", o.Owner.ContainerID, o.Addr)
		}
		if prev, dup := seen[o.Addr]; dup {
			t.Errorf("duplicate address %s for %s and %s", o.Addr, prev.ContainerID, o.Owner.ContainerID)
		}
		seen[o.Addr] = o.Owner
	}
	stored := StoreAllocations(t, ctx, s, pool)
	if len(stored) != len(seen) {
		t.Errorf("store holds %d allocations, callers got %d", len(stored), len(seen))
	}
	for addr, o := range seen {
		if a, ok := stored[addr]; !ok || a.ContainerID != o.ContainerID || a.IfName != o.IfName {
			t.Errorf("store entry for %s is %+v, want holder %s", addr, a, o.ContainerID)
		}
	}
	return failed
}

// ReleaseAll releases every outcome's owner on its node, in parallel per node,
// and checks the store is left without allocations.
func ReleaseAll(t testing.TB, ctx context.Context, nodes []*ipam.Allocator, s ipam.Store, pool ipam.Pool, outs []Outcome, workers int) {
	t.Helper()
	byNode := map[string]*ipam.Allocator{}
	for _, a := range nodes {
		byNode[a.Node] = a
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(outs))
	per := map[string][]Outcome{}
	for _, o := range outs {
		per[o.Node] = append(per[o.Node], o)
	}
	for node, list := range per {
		jobs := make(chan Outcome)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for o := range jobs {
					if err := byNode[node].Release(ctx, pool, o.Owner); err != nil {
						errs <- fmt.Errorf("release %s: %w", o.Owner.ContainerID, err)
					}
				}
			}()
		}
		go func() {
			for _, o := range list {
				jobs <- o
			}
			close(jobs)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if left := StoreAllocations(t, ctx, s, pool); len(left) != 0 {
		t.Errorf("store still holds %d allocations after releasing all", len(left))
	}
}
