package ipam_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1alpha1 "github.com/rdmanet/rdmanet/api/ipam/v1alpha1"
	"github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/internal/ipam/ipamtest"
)

// nadOutcome is one allocation made for one of several NAD configs.
type nadOutcome struct {
	nad   int
	owner ipam.Owner
	addr  netip.Addr
}

// exhaustNADs has every node allocate, in parallel, one address after the
// other from each NAD config in turn until each reports its range
// exhausted. Any other error fails the test.
func exhaustNADs(t *testing.T, ctx context.Context, nodes []*ipam.Allocator, cfgs []*ipam.Config) []nadOutcome {
	t.Helper()
	var (
		mu   sync.Mutex
		outs []nadOutcome
		wg   sync.WaitGroup
	)
	for _, a := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done := make([]bool, len(cfgs))
			for i := 0; ; i++ {
				left := false
				for c, cfg := range cfgs {
					if done[c] {
						continue
					}
					left = true
					o := ipamtest.Owner(fmt.Sprintf("%s-nad%d", a.Node, c), i)
					addr, err := a.Allocate(ctx, cfg.Network, cfg.Ranges[0], o)
					switch {
					case errors.Is(err, ipam.ErrExhausted):
						done[c] = true
					case err != nil:
						t.Errorf("node %s, NAD %d: %v", a.Node, c, err)
						done[c] = true
					default:
						mu.Lock()
						outs = append(outs, nadOutcome{nad: c, owner: o, addr: addr})
						mu.Unlock()
					}
				}
				if !left {
					return
				}
			}
		}()
	}
	wg.Wait()
	return outs
}

func parseNAD(t testing.TB, name, ipamJSON string) *ipam.Config {
	t.Helper()
	cfg, err := ipam.Parse([]byte(`{"cniVersion":"1.0.0","name":"`+name+`","ipam":`+ipamJSON+`}`), ipam.Env{})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// testOverlappingNADs (issue 13, defect 6): two NADs of one network whose
// ranges overlap (10.70.0.0/26 and 10.70.0.0/27, inside it) never give one
// address to two pods, unless both opted out with
// "enable_overlapping_ranges": false. Every node exhausts both ranges: with
// the protection the union holds 62 distinct addresses; without it each
// range hands out its own (62 + 30), 30 of them twice.
func testOverlappingNADs(t *testing.T, newNodes func(t *testing.T) []*ipam.Allocator, network string) {
	tests := []struct {
		name      string
		extra     string
		wantTotal int
		wantDup   int
	}{
		{name: "protected by default", wantTotal: 62},
		{name: "explicitly protected", extra: `,"enable_overlapping_ranges":true`, wantTotal: 62},
		{name: "both opted out", extra: `,"enable_overlapping_ranges":false`, wantTotal: 92, wantDup: 30},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			net := fmt.Sprintf("%s-%d", network, i)
			cfgs := []*ipam.Config{
				parseNAD(t, "train-a", `{"type":"whereabouts","range":"10.70.0.0/26","network_name":"`+net+`"`+tc.extra+`}`),
				parseNAD(t, "train-b", `{"type":"whereabouts","range":"10.70.0.0/27","network_name":"`+net+`"`+tc.extra+`}`),
			}
			outs := exhaustNADs(t, ctx, newNodes(t), cfgs)
			holders := map[netip.Addr][]nadOutcome{}
			for _, o := range outs {
				if !cfgs[o.nad].Ranges[0].Usable(o.addr) {
					t.Errorf("NAD %d got %s outside its range", o.nad, o.addr)
				}
				holders[o.addr] = append(holders[o.addr], o)
			}
			dup := 0
			for addr, hs := range holders {
				if len(hs) > 1 {
					dup++
					if tc.wantDup == 0 {
						t.Errorf("%s given to %d pods: %+v", addr, len(hs), hs)
					}
				}
			}
			if len(outs) != tc.wantTotal || dup != tc.wantDup {
				t.Errorf("%d allocations, %d addresses held twice; want %d and %d", len(outs), dup, tc.wantTotal, tc.wantDup)
			}
		})
	}
}

// testGatewayReserved (issue 13, defect 7): a NAD's gateway is never given
// to a pod, neither by that NAD nor by another NAD of the network over the
// same range or an overlapping one; when a pod already holds it, the NAD
// with the gateway fails ADD naming that pod.
func testGatewayReserved(t *testing.T, newNodes func(t *testing.T) []*ipam.Allocator, network string) {
	t.Run("reserved before the other NADs allocate", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		net := network + "-first"
		withGW := parseNAD(t, "gw", `{"range":"10.72.0.0/26","gateway":"10.72.0.1","network_name":"`+net+`"}`)
		cfgs := []*ipam.Config{
			withGW,
			parseNAD(t, "same-range", `{"range":"10.72.0.0/26","network_name":"`+net+`"}`),
			parseNAD(t, "wider-range", `{"range":"10.72.0.0/25","network_name":"`+net+`"}`),
		}
		nodes := newNodes(t)
		if _, err := nodes[0].Allocate(ctx, withGW.Network, withGW.Ranges[0], ipamtest.Owner("first", 0)); err != nil {
			t.Fatal(err)
		}
		outs := exhaustNADs(t, ctx, nodes, cfgs)
		seen := map[netip.Addr]bool{}
		for _, o := range outs {
			if o.addr == withGW.Ranges[0].Gateway {
				t.Errorf("NAD %d gave the gateway %s to %s", o.nad, o.addr, o.owner.ContainerID)
			}
			if seen[o.addr] {
				t.Errorf("%s given twice", o.addr)
			}
			seen[o.addr] = true
		}
		// 10.72.0.0/25 has 126 usable addresses; the first pod holds one, the gateway is reserved.
		if len(outs) != 124 {
			t.Errorf("%d allocations, want 124 (126 usable, the gateway reserved, one held before)", len(outs))
		}
	})
	t.Run("a pod holds it already", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		net := network + "-taken"
		nodes := newNodes(t)
		plain := parseNAD(t, "plain", `{"range":"10.73.0.0/27","network_name":"`+net+`"}`)
		holder := ipamtest.Owner("early", 0)
		addr, err := nodes[0].Allocate(ctx, plain.Network, plain.Ranges[0], holder)
		if err != nil || addr.String() != "10.73.0.1" {
			t.Fatalf("first allocation %s %v, want 10.73.0.1", addr, err)
		}
		withGW := parseNAD(t, "gw", `{"range":"10.73.0.0/27","gateway":"10.73.0.1","network_name":"`+net+`"}`)
		_, err = nodes[1].Allocate(ctx, withGW.Network, withGW.Ranges[0], ipamtest.Owner("late", 0))
		var taken *ipam.GatewayTakenError
		if !errors.As(err, &taken) || taken.Holder.ContainerID != holder.ContainerID {
			t.Fatalf("ADD of the NAD whose gateway a pod holds: %v, want a GatewayTakenError naming %s", err, holder.ContainerID)
		}
	})
}

func localNodes(n int) func(t *testing.T) []*ipam.Allocator {
	return func(t *testing.T) []*ipam.Allocator {
		return nodes(t, &ipam.LocalStore{Dir: t.TempDir()}, n)
	}
}

func TestOverlappingNADsLocal(t *testing.T) { testOverlappingNADs(t, localNodes(3), "overlap") }

func TestGatewayReservedLocal(t *testing.T) { testGatewayReserved(t, localNodes(3), "gw") }

// listCounter counts List calls.
type listCounter struct {
	ipam.Store
	lists atomic.Int64
}

func (c *listCounter) List(ctx context.Context, pool ipam.Pool, node string) ([]v1alpha1.IPAMBlock, error) {
	c.lists.Add(1)
	return c.Store.List(ctx, pool, node)
}

// TestGatewayReservationOnce: only a node's first allocation of a pool with
// a gateway checks the reservation; later ones keep the one-request path.
func TestGatewayReservationOnce(t *testing.T) {
	ctx := context.Background()
	store := &listCounter{Store: &ipam.LocalStore{Dir: t.TempDir()}}
	a := nodes(t, store, 1)[0]
	cfg := parseNAD(t, "gw", `{"range":"10.74.0.0/24","gateway":"10.74.0.1"}`)
	for i := range 3 {
		before := store.lists.Load()
		if _, err := a.Allocate(ctx, cfg.Network, cfg.Ranges[0], ipamtest.Owner("n", i)); err != nil {
			t.Fatal(err)
		}
		if got := store.lists.Load() - before; i > 0 && got != 0 {
			t.Errorf("allocation %d listed %d times, want 0 (gateway marker and block cache warm)", i, got)
		}
	}
	blocks, err := store.Store.List(ctx, cfg.Pool(cfg.Ranges[0]), "")
	if err != nil {
		t.Fatal(err)
	}
	reserved := 0
	for _, b := range blocks {
		for k, al := range b.Spec.Allocations {
			if al.Reserved != "" {
				reserved++
				if k != "10.74.0.1" || al.Reserved != ipam.ReservedGateway || al.Created == "" {
					t.Errorf("reservation %s: %+v", k, al)
				}
			} else if al.Created == "" {
				t.Errorf("allocation %s has no created time", k)
			}
		}
	}
	if reserved != 1 {
		t.Errorf("%d reservations, want the gateway's one", reserved)
	}
}
