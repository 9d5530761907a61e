package ipam_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/test/apiserver"
)

// TestKubeNodeCacheAfterPowerLoss: the node's block cache is replaced
// without fsync (fsutil.ReplaceFile), so after a power loss the file may be
// empty or older than the API server. On a real API server, every such
// outcome must still give distinct addresses and a DEL that releases.
func TestKubeNodeCacheAfterPowerLoss(t *testing.T) {
	srv := apiserver.Shared(t)
	store := kubeStore(t, srv.Config())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, r := parseRange(t, `{"range":"10.62.0.0/24","network_name":"`+uniq("powerloss")+`"}`)
	pool := ipam.Pool{Network: cfg.Network, Prefix: r.Prefix}
	node := kubeNodes(t, store, 1)[0]
	owner := func(i int) ipam.Owner { return ipam.Owner{ContainerID: fmt.Sprintf("c%d", i), IfName: "net1"} }
	got := map[int]netip.Addr{}
	alloc := func(i int) {
		t.Helper()
		a, err := node.Allocate(ctx, cfg.Network, r, owner(i))
		if err != nil {
			t.Fatalf("ADD c%d: %v", i, err)
		}
		for j, b := range got {
			if b == a {
				t.Fatalf("ADD c%d got %s, which c%d holds", i, a, j)
			}
		}
		got[i] = a
	}
	alloc(0)
	caches, err := filepath.Glob(filepath.Join(node.StateDir, "*.blocks.json"))
	if err != nil || len(caches) != 1 {
		t.Fatalf("block caches %v (%v), want one", caches, err)
	}
	older, err := os.ReadFile(caches[0]) // the cache as it was after one ADD
	if err != nil {
		t.Fatal(err)
	}
	alloc(1)
	alloc(2)
	put := func(data []byte) {
		t.Helper()
		if err := os.WriteFile(caches[0], data, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	put(older) // an older cache came back: its resourceVersion is stale
	alloc(3)
	put(nil) // an empty file behind the rename
	alloc(4)
	put(older) // a DEL of an owner the older cache lacks
	if err := node.Release(ctx, pool, owner(2)); err != nil {
		t.Fatalf("DEL c2: %v", err)
	}
	delete(got, 2)

	// The API server holds exactly the live owners, at the addresses ADD gave.
	for i := range 5 {
		a, err := node.Lookup(ctx, pool, owner(i))
		want, live := got[i]
		switch {
		case live && (err != nil || a != want):
			t.Errorf("c%d: store has %s (%v), want %s", i, a, err, want)
		case !live && err == nil && a.IsValid():
			t.Errorf("c%d: store still has %s after DEL", i, a)
		}
	}
}
