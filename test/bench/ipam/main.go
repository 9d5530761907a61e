// Command ipam-bench measures rdmanet-ipam's kubernetes store against a real
// kube-apiserver + etcd (started by test/apiserver): N allocations spread
// over node identities by C concurrent allocators, then N releases. Per run
// it prints a detail line and the summary line
//
//	ipam-bench: allocations=1000 nodes=10 concurrency=10 wall_s=… per_s=… p99_ms=… duplicates=0 leaked=0
//
// Run it with `make bench-ipam`.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/test/apiserver"
)

func main() {
	allocations := flag.Int("allocations", 1000, "allocations per run")
	nodes := flag.Int("nodes", 10, "node identities")
	conc := flag.String("concurrency", "1,10,64", "comma-separated concurrent allocator counts, one run each")
	rangeFlag := flag.String("range", "10.100.0.0/16", "range to allocate from")
	slice := flag.String("node-slice-size", "", `block size ("/26"); default: the plugin's default`)
	flag.Parse()
	if err := run(*allocations, *nodes, *conc, *rangeFlag, *slice); err != nil {
		fmt.Fprintln(os.Stderr, "ipam-bench:", err)
		os.Exit(1)
	}
}

type counter struct {
	next http.RoundTripper
	n    *atomic.Int64
	ns   *atomic.Int64 // total request time
}

func (c counter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	t0 := time.Now()
	resp, err := c.next.RoundTrip(r)
	c.ns.Add(int64(time.Since(t0)))
	return resp, err
}

func run(allocations, nodes int, concList, rangeText, slice string) error {
	ctx := context.Background()
	fmt.Fprintln(os.Stderr, "ipam-bench: starting etcd + kube-apiserver")
	srv, err := apiserver.Start(ctx)
	if err != nil {
		return err
	}
	defer srv.Stop()
	if err := srv.ApplyCRDs(ctx); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "ipam-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := warmUp(ctx, srv, tmp); err != nil {
		return err
	}

	for i, cs := range strings.Split(concList, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(cs))
		if err != nil || c < 1 {
			return fmt.Errorf("bad -concurrency entry %q", cs)
		}
		network := fmt.Sprintf("bench-%d-c%d", i, c)
		cfg, err := ipam.Parse([]byte(fmt.Sprintf(`{"cniVersion":"1.0.0","name":"bench","ipam":{"range":%q,"network_name":%q,"node_slice_size":%q}}`, rangeText, network, slice)), ipam.Env{})
		if err != nil {
			return err
		}
		r := cfg.Ranges[0]
		var requests, reqNanos atomic.Int64
		// One client, one lock directory per node identity, like separate nodes.
		allocs := make([]*ipam.Allocator, nodes)
		for n := range nodes {
			rc := srv.Config()
			rc.UserAgent = fmt.Sprintf("ipam-bench-node-%d", n)
			rc.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return counter{rt, &requests, &reqNanos} }
			store, err := ipam.NewKubeStore(rc)
			if err != nil {
				return err
			}
			name := fmt.Sprintf("bench-node-%02d", n)
			allocs[n] = &ipam.Allocator{Store: store, Node: name, Lock: &ipam.FileLock{Dir: filepath.Join(tmp, network, name)}, StateDir: filepath.Join(tmp, network, name)}
		}
		owner := func(j int) ipam.Owner {
			return ipam.Owner{ContainerID: fmt.Sprintf("bench-%06d", j), IfName: "net1", PodNamespace: "bench", PodName: fmt.Sprintf("p%06d", j), PodUID: fmt.Sprintf("uid-%06d", j)}
		}

		// ADD phase.
		lat := make([]time.Duration, allocations)
		addrs := make([]netip.Addr, allocations)
		errs := make([]error, allocations)
		var next atomic.Int64
		start := time.Now()
		var wg sync.WaitGroup
		for range c {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					j := int(next.Add(1)) - 1
					if j >= allocations {
						return
					}
					t0 := time.Now()
					addrs[j], errs[j] = allocs[j%nodes].Allocate(ctx, network, r, owner(j))
					lat[j] = time.Since(t0)
				}
			}()
		}
		wg.Wait()
		wall := time.Since(start)
		addRequests, addReqNanos := requests.Load(), reqNanos.Load()

		failed, duplicates := 0, 0
		seen := map[netip.Addr]bool{}
		for j := range allocations {
			if errs[j] != nil {
				failed++
				if failed == 1 {
					fmt.Fprintf(os.Stderr, "ipam-bench: first failure: %v\n", errs[j])
				}
				continue
			}
			if seen[addrs[j]] || !r.Usable(addrs[j]) {
				duplicates++
			}
			seen[addrs[j]] = true
		}
		pool := ipam.Pool{Network: network, Prefix: r.Prefix}
		blocks, err := allocs[0].Store.List(ctx, pool, "")
		if err != nil {
			return err
		}
		stored := 0
		for _, b := range blocks {
			stored += len(b.Spec.Allocations)
		}
		if stored != len(seen) {
			duplicates += abs(stored - len(seen)) // the store and the callers disagree
		}

		// DEL phase.
		next.Store(0)
		delStart := time.Now()
		for range c {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					j := int(next.Add(1)) - 1
					if j >= allocations {
						return
					}
					if err := allocs[j%nodes].Release(ctx, pool, owner(j)); err != nil {
						fmt.Fprintf(os.Stderr, "ipam-bench: release %d: %v\n", j, err)
					}
				}
			}()
		}
		wg.Wait()
		delWall := time.Since(delStart)
		blocks, err = allocs[0].Store.List(ctx, pool, "")
		if err != nil {
			return err
		}
		leaked := 0
		for _, b := range blocks {
			leaked += len(b.Spec.Allocations)
		}

		slices.Sort(lat)
		pct := func(p float64) float64 {
			return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
		}
		fmt.Printf("ipam-bench-detail: concurrency=%d p50_ms=%.1f p90_ms=%.1f p99_ms=%.1f max_ms=%.1f failed=%d api_requests_per_add=%.2f api_request_avg_ms=%.1f blocks=%d del_wall_s=%.2f\n",
			c, pct(0.50), pct(0.90), pct(0.99), float64(lat[len(lat)-1].Microseconds())/1000, failed,
			float64(addRequests)/float64(allocations), float64(addReqNanos)/float64(max(addRequests, 1))/1e6, len(blocks), delWall.Seconds())
		fmt.Printf("ipam-bench: allocations=%d nodes=%d concurrency=%d wall_s=%.2f per_s=%.0f p99_ms=%.1f duplicates=%d leaked=%d\n",
			allocations, nodes, c, wall.Seconds(), float64(allocations-failed)/wall.Seconds(), pct(0.99), duplicates, leaked)
		if failed > 0 || duplicates > 0 || leaked > 0 {
			return fmt.Errorf("run with concurrency %d: %d failed, %d duplicates, %d leaked", c, failed, duplicates, leaked)
		}
	}
	return nil
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// warmUp makes the API server initialise the IPAMBlock storage and watch
// cache (a one-time cost of a fresh server) before anything is measured.
func warmUp(ctx context.Context, srv *apiserver.Server, tmp string) error {
	cfg, err := ipam.Parse([]byte(`{"cniVersion":"1.0.0","name":"warm","ipam":{"range":"10.99.0.0/24","network_name":"warm-up"}}`), ipam.Env{})
	if err != nil {
		return err
	}
	store, err := ipam.NewKubeStore(srv.Config())
	if err != nil {
		return err
	}
	a := &ipam.Allocator{Store: store, Node: "warm-up", Lock: &ipam.FileLock{Dir: filepath.Join(tmp, "warm-up")}}
	o := ipam.Owner{ContainerID: "warm-up", IfName: "net1"}
	if _, err := a.Allocate(ctx, cfg.Network, cfg.Ranges[0], o); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	return a.Release(ctx, ipam.Pool{Network: cfg.Network, Prefix: cfg.Ranges[0].Prefix}, o)
}
