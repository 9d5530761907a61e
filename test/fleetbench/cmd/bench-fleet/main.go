// Command bench-fleet measures what rdmanet's node-side code costs one real
// kube-apiserver at fleet sizes (issue 32): thousands of simulated nodes,
// each running rdmanet's real node code as goroutines with its own identity
// (test/fleetbench). It prints progress and breakdowns on stderr and ONE
// summary line per size on stdout:
//
//	bench-fleet: nodes=N steady_writes_per_node_min=… writes_per_pod_start=… slice_writes_per_flap=… controller_rss_mib=… …
//
// Run it with `make bench-fleet` (docs/benchmarks.md).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rdmanet/rdmanet/test/fleetbench"
)

func main() {
	sizes := flag.String("nodes", "1000,2000", "fleet sizes, comma-separated")
	addrs := flag.String("addresses", "50000,100000", "controller phase: allocated addresses per size (same count as -nodes; 0 skips)")
	steady := flag.Duration("steady", 3*time.Minute, "steady-state window")
	settle := flag.Duration("settle", 75*time.Second, "run before the steady window (startup writes; the slice controller's 1-minute mutation cache)")
	pods := flag.Int("pods", 1000, "pods of the job start")
	draEvery := flag.Int("dra-every", 4, "every n-th pod of the job is a DRA pod (0: none)")
	full := flag.Int("full-agents", 2, "nodes that run the real agent loop over their own sysfs tree (the flap node among them)")
	ctrlBin := flag.String("controller-bin", "", "rdmanet-controller binary (required when -addresses is not 0)")
	perConn := flag.Int("nodes-per-connection", 16, "simulated nodes sharing one HTTP/2 connection to the API server (each with its own token, clients and rate limits); 1: one connection per node process, as in a real cluster")
	ctrlOnly := flag.Bool("controller-only", false, "run only the controller phase (Nodes and pods exist, no simulated node runs); its line has the controller fields only")
	rescan := flag.Duration("rescan", 10*time.Second, "how often the nodes that share the snapshot hand it to their publisher (the agent's full rescan is 10 s; a longer one spares the simulator's CPU at thousands of nodes, the steady window still sees several)")
	memLimit := flag.Int("memory-limit-mib", 0, "soft limit of this process's Go heap in MiB (runtime/debug.SetMemoryLimit; 0: none): the garbage collector runs harder near it instead of letting the heap grow to twice the live nodes")
	heapProfile := flag.String("heap-profile", "", "write the heap profile (pprof) here once the fleet published (a size's number is put before the extension when there are several sizes)")
	inflight := flag.Int("max-requests-inflight", 3000, "kube-apiserver --max-requests-inflight (and a third of it mutating)")
	flag.Parse()
	if *memLimit > 0 {
		debug.SetMemoryLimit(int64(*memLimit) << 20)
	}
	if err := run(*sizes, *addrs, *steady, *settle, *pods, *draEvery, *full, *ctrlBin, *inflight, *perConn, *ctrlOnly, *heapProfile, *rescan); err != nil {
		fmt.Fprintln(os.Stderr, "bench-fleet:", err)
		os.Exit(1)
	}
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func run(sizes, addrs string, steady, settle time.Duration, pods, draEvery, full int, ctrlBin string, inflight, perConn int, ctrlOnly bool, heapProfile string, rescan time.Duration) error {
	ns, err := ints(sizes)
	if err != nil {
		return fmt.Errorf("-nodes: %w", err)
	}
	as, err := ints(addrs)
	if err != nil || len(as) != len(ns) && !(len(as) == 1 && as[0] == 0) {
		return fmt.Errorf("-addresses=%q: give one count per size, or 0", addrs)
	}
	// A simulated fleet on a small shared machine starves its own
	// connections' HTTP/2 health checks (client-go: a ping after 30 s idle,
	// 15 s to answer), and a lost connection restarts the watches of every
	// node on it; give them longer unless the caller chose.
	for k, v := range map[string]string{"HTTP2_READ_IDLE_TIMEOUT_SECONDS": "120", "HTTP2_PING_TIMEOUT_SECONDS": "60"} {
		if os.Getenv(k) == "" {
			_ = os.Setenv(k, v)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var results []*fleetbench.Result
	for i, n := range ns {
		a := 0
		if len(as) == len(ns) {
			a = as[i]
		}
		hp := heapProfile
		if hp != "" && len(ns) > 1 {
			ext := filepath.Ext(hp)
			hp = strings.TrimSuffix(hp, ext) + "-" + strconv.Itoa(n) + ext
		}
		r, err := fleetbench.Run(ctx, fleetbench.Options{
			Nodes: n, FullAgents: full, NodesPerConnection: perConn, ControllerOnly: ctrlOnly, Settle: settle, Steady: steady, Pods: pods, DRAEvery: draEvery,
			HeapProfile:   hp,
			FullRescan:    rescan,
			Controller:    fleetbench.ControllerOptions{Addresses: a, Bin: ctrlBin},
			APIServerArgs: []string{"--max-requests-inflight=" + strconv.Itoa(inflight), "--max-mutating-requests-inflight=" + strconv.Itoa(inflight/3)},
			Progress:      os.Stderr,
		})
		if err != nil {
			return fmt.Errorf("%d nodes: %w", n, err)
		}
		r.Details(os.Stderr)
		results = append(results, r)
	}
	slope := 0.0
	if len(results) >= 2 {
		slope = fleetbench.BytesPerAddress(results[0].Controller, results[len(results)-1].Controller)
	}
	for _, r := range results {
		fmt.Println(r.Line(slope))
	}
	return nil
}
