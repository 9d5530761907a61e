package ipam_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/internal/ipam/ipamtest"
)

func parseRange(t testing.TB, ipamJSON string) (*ipam.Config, *ipam.Range) {
	t.Helper()
	cfg, err := ipam.Parse([]byte(`{"cniVersion":"1.0.0","name":"t","ipam":`+ipamJSON+`}`), ipam.Env{})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, cfg.Ranges[0]
}

// nodes returns n allocators sharing one local store (standing in for the
// cluster store), each with its own node lock dir.
func nodes(t testing.TB, store ipam.Store, n int) []*ipam.Allocator {
	dir := t.TempDir()
	var out []*ipam.Allocator
	for i := range n {
		name := fmt.Sprintf("node-%02d", i)
		out = append(out, &ipam.Allocator{Store: store, Node: name, Lock: &ipam.FileLock{Dir: filepath.Join(dir, name)}, StateDir: filepath.Join(dir, name)})
	}
	return out
}

func TestAllocateIdempotentAndRelease(t *testing.T) {
	ctx := context.Background()
	cfg, r := parseRange(t, `{"range":"10.60.0.0/16","exclude":["10.60.0.0/24"]}`)
	store := &ipam.LocalStore{Dir: t.TempDir()}
	a := nodes(t, store, 1)[0]
	pool := ipam.Pool{Network: cfg.Network, Prefix: r.Prefix}
	o1 := ipamtest.Owner("x", 1)

	first, err := a.Allocate(ctx, cfg.Network, r, o1)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Usable(first) || netip.MustParsePrefix("10.60.0.0/24").Contains(first) {
		t.Errorf("first address %s is not usable or lies in the excluded /24", first)
	}
	again, err := a.Allocate(ctx, cfg.Network, r, o1)
	if err != nil || again != first {
		t.Fatalf("repeated ADD returned %s (%v), want %s", again, err, first)
	}
	o2 := o1
	o2.IfName = "net2"
	second, err := a.Allocate(ctx, cfg.Network, r, o2)
	if err != nil || second == first {
		t.Fatalf("other ifname got %s (%v), want a different address", second, err)
	}
	if got, err := a.Lookup(ctx, pool, o1); err != nil || got != first {
		t.Fatalf("Lookup = %s, %v", got, err)
	}
	if err := a.Release(ctx, pool, o1); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Lookup(ctx, pool, o1); !errors.Is(err, ipam.ErrNotFound) {
		t.Fatalf("Lookup after release: %v, want ErrNotFound", err)
	}
	if err := a.Release(ctx, pool, o1); err != nil {
		t.Fatalf("second release: %v", err)
	}
	if err := a.Release(ctx, pool, ipamtest.Owner("never", 9)); err != nil {
		t.Fatalf("release of unknown owner: %v", err)
	}
	reused, err := a.Allocate(ctx, cfg.Network, r, ipamtest.Owner("y", 1))
	if err != nil || reused != first {
		t.Fatalf("freed address not reused: got %s (%v), want %s", reused, err, first)
	}
}

func TestConcurrentNodesLocal(t *testing.T) {
	tests := []struct {
		name       string
		ipam       string
		nodes      int
		perNode    int
		wantFailed int
	}{
		{name: "plenty", ipam: `{"range":"10.60.0.0/16","exclude":["10.60.0.0/24"]}`, nodes: 4, perNode: 25},
		// 100 usable addresses (.1-.100) in blocks of 16: nodes must borrow.
		{name: "exact fit borrows across nodes", ipam: `{"range":"10.61.0.0/24","range_end":"10.61.0.100","node_slice_size":"/28"}`, nodes: 4, perNode: 25},
		{name: "one short", ipam: `{"range":"10.61.0.0/24","range_end":"10.61.0.99","node_slice_size":"/28"}`, nodes: 4, perNode: 25, wantFailed: 1},
		{name: "ipv6 with small blocks", ipam: `{"range":"fd00:61::/64","node_slice_size":"/124"}`, nodes: 3, perNode: 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cfg, r := parseRange(t, tc.ipam)
			store := &ipam.LocalStore{Dir: t.TempDir()}
			ns := nodes(t, store, tc.nodes)
			outs := ipamtest.AllocateMany(ctx, ns, cfg.Network, r, tc.perNode, 4)
			failed := ipamtest.CheckOutcomes(t, ctx, store, ipam.Pool{Network: cfg.Network, Prefix: r.Prefix}, r, outs)
			if len(failed) != tc.wantFailed {
				t.Fatalf("%d allocations failed, want %d: %v", len(failed), tc.wantFailed, failed)
			}
			for _, f := range failed {
				if !errors.Is(f.Err, ipam.ErrExhausted) || !strings.Contains(f.Err.Error(), "widen the range") || !strings.Contains(f.Err.Error(), r.Spec) {
					t.Errorf("failure is not a clear exhaustion error: %v", f.Err)
				}
			}
			ipamtest.ReleaseAll(t, ctx, ns, store, ipam.Pool{Network: cfg.Network, Prefix: r.Prefix}, outs, 4)
		})
	}
}

func TestSharedPoolAcrossConfigs(t *testing.T) {
	// Two configs with the same network and CIDR but different bounds share
	// one pool: neither hands out an address the other holds.
	ctx := context.Background()
	cfgA, ra := parseRange(t, `{"range":"10.70.0.0/24","range_end":"10.70.0.40"}`)
	_, rb := parseRange(t, `{"range":"10.70.0.0/24","range_start":"10.70.0.10"}`)
	store := &ipam.LocalStore{Dir: t.TempDir()}
	a := nodes(t, store, 1)[0]
	seen := map[netip.Addr]bool{}
	for i := range 15 {
		for j, r := range []*ipam.Range{ra, rb} {
			addr, err := a.Allocate(ctx, cfgA.Network, r, ipamtest.Owner(fmt.Sprintf("cfg%d", j), i))
			if err != nil {
				t.Fatal(err)
			}
			if seen[addr] {
				t.Fatalf("address %s handed out twice", addr)
			}
			if !r.Usable(addr) {
				t.Fatalf("%s not usable in %s", addr, r.Spec)
			}
			seen[addr] = true
		}
	}
}

func TestLocalStoreCrashLeftovers(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg, r := parseRange(t, `{"range":"10.80.0.0/24"}`)
	store := &ipam.LocalStore{Dir: dir}
	a := nodes(t, store, 1)[0]
	want, err := a.Allocate(ctx, cfg.Network, r, ipamtest.Owner("n", 1))
	if err != nil {
		t.Fatal(err)
	}
	// A process killed between writing the temp file and the rename leaves a
	// temp file behind; the store ignores it.
	if err := os.WriteFile(filepath.Join(dir, ".blocks-123.tmp"), []byte("{half"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := a.Allocate(ctx, cfg.Network, r, ipamtest.Owner("n", 1))
	if err != nil || got != want {
		t.Fatalf("after leftover temp file: %s %v, want %s", got, err, want)
	}
	if err := os.WriteFile(filepath.Join(dir, "blocks.json"), []byte("{torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = a.Allocate(ctx, cfg.Network, r, ipamtest.Owner("n", 2))
	if err == nil || !strings.Contains(err.Error(), "corrupt") || !strings.Contains(err.Error(), "fix:") {
		t.Fatalf("corrupt store: %v, want a clear error", err)
	}
}

func TestCanceledContext(t *testing.T) {
	_, r := parseRange(t, `{"range":"10.80.0.0/24"}`)
	store := &ipam.LocalStore{Dir: t.TempDir()}
	a := nodes(t, store, 1)[0]
	unlock, err := a.Lock.Lock(context.Background(), ipam.Pool{Network: "default", Prefix: r.Prefix}.Key())
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := a.Allocate(ctx, "default", r, ipamtest.Owner("n", 1)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Allocate with a held lock and canceled ctx: %v, want context.Canceled", err)
	}
}

// TestRepeatedAddOfBorrowedAddress: an attachment that borrowed from another
// node's block gets the same address on a repeated ADD, even after its own
// node's block has room again.
func TestRepeatedAddOfBorrowedAddress(t *testing.T) {
	ctx := context.Background()
	// Two blocks of 8: .0-.7 (usable .1-.7) and .8-.15 (usable .8-.14).
	cfg, r := parseRange(t, `{"range":"10.66.0.0/28","node_slice_size":"/29"}`)
	pool := ipam.Pool{Network: cfg.Network, Prefix: r.Prefix}
	store := &ipam.LocalStore{Dir: t.TempDir()}
	ns := nodes(t, store, 2)
	a, b := ns[0], ns[1]
	for i := range 7 { // a claims and fills one block
		if _, err := a.Allocate(ctx, cfg.Network, r, ipamtest.Owner("a", i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 7 { // b claims and fills the other
		if _, err := b.Allocate(ctx, cfg.Network, r, ipamtest.Owner("b", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Release(ctx, pool, ipamtest.Owner("a", 0)); err != nil {
		t.Fatal(err)
	}
	x := ipamtest.Owner("b", 100)
	borrowed, err := b.Allocate(ctx, cfg.Network, r, x) // only a's block has room
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx, pool, ipamtest.Owner("b", 0)); err != nil { // b's block has room again
		t.Fatal(err)
	}
	again, err := b.Allocate(ctx, cfg.Network, r, x)
	if err != nil || again != borrowed {
		t.Fatalf("repeated ADD of a borrowed address returned %s (%v), want %s", again, err, borrowed)
	}
	if err := b.Release(ctx, pool, x); err != nil {
		t.Fatal(err)
	}
	if n := len(ipamtest.StoreAllocations(t, ctx, store, pool)); n != 12 {
		t.Fatalf("%d allocations left, want 12", n)
	}
}
