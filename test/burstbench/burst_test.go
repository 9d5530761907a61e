//go:build burstbench

// The burst benchmark and its smoke test need Multus thick built into
// .tools/bin (make multus-thick-tool): the build tag keeps them out of
// `go test ./...`; make bench-burst and make test-burst-smoke set it.

package burstbench

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rdmanet/rdmanet/test/apiserver"
	"github.com/rdmanet/rdmanet/test/pluginbin"
)

var (
	flagPods      = flag.String("burst.pods", "64,128,256", "pods attached at once, one row per value (the issue's list is 64,128,256,512)")
	flagRails     = flag.String("burst.rails", "1,4,8", "networks (rails) per pod, one row per value")
	flagRuns      = flag.Int("burst.runs", 3, "runs of every row; the summary line is the median, the spread line min–max")
	flagVFs       = flag.Int("burst.vfs", 32, "VF stand-ins of the node: rails get exclusive VFs pod by pod while they last, macvlan after")
	flagImpls     = flag.String("burst.impls", strings.Join(Impls, ","), "impls, run alternately row by row")
	flagAttempts  = flag.Int("burst.attempts", 4, "ADDs per pod at most (a failed ADD is torn down and retried)")
	flagTimeout   = flag.Duration("burst.add-timeout", DefaultAddTimeout, "bound on each ADD, for both impls, as kubelet's --runtime-request-timeout bounds a sandbox's creation (the plugin process is killed then; 0: none)")
	flagConnLimit = flag.Int("burst.multus-connection-limit", 0, "multus-daemon's connectionLimit (0: unset, upstream's default)")
	flagDaemon    = flag.String("burst.rdmanet-daemon-args", "", "extra flags of rdmanet-daemon, space-separated (e.g. its limits on calls: --max-inflight-calls=32 --max-queued-calls=128)")
)

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	apiserver.StopShared()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binaries builds, once per test binary, what the runtime and the daemons
// exec: the rdmanet shim and daemon, rdmanet's delegates and the upstream
// bridge, macvlan and host-local, with the test switches
// (RDMANET_NETOPS=record), VCS-stamped so the daemon runs its own delegates
// in-process.
func binaries(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = pluginbin.TempDir("rdmanet-burst-bin-", pluginbin.Meta, pluginbin.MetaDirect, pluginbin.MetaDaemon,
			pluginbin.SRIOV, pluginbin.RDMA, pluginbin.IPAM, pluginbin.Bridge, pluginbin.Macvlan, pluginbin.HostLocal)
	})
	if binErr != nil {
		t.Fatalf("build plugins: %v", binErr)
	}
	return binDir
}

// runBench runs every row (pods × rails) for every impl, runs times, the
// impls alternating row by row and run by run so that a change of the
// machine's load hits both, and returns the runs by row.
func runBench(t *testing.T, impls []string, pods, rails []int, runs, vfs int, o Options) map[string][]Result {
	n := NewNode(t, binaries(t), vfs, slices.Max(rails))
	byName := map[string]Impl{}
	for _, name := range impls {
		byName[name] = NewImpl(t, n, name, o)
	}
	out := map[string][]Result{}
	for _, np := range pods {
		for _, m := range rails {
			for run := range runs {
				for _, name := range impls {
					tag := fmt.Sprintf("%s-%d-%d-%d", name, np, m, run)
					r := Row(t, n, byName[name], np, m, tag, o)
					if o.Progress != nil {
						o.Progress(fmt.Sprintf("run %d/%d: %s unattached=%d wall_s=%.2f delegate_cpu_ms=%.0f fail_reasons=%v", run+1, runs, r.Line(), r.Unattached, r.Wall.Seconds(), ms(r.ChildCPU), r.FailReasons))
					}
					key := fmt.Sprintf("%s/%d/%d", name, np, m)
					out[key] = append(out[key], r)
				}
			}
		}
	}
	return out
}

// TestBurst is the benchmark (make bench-burst): it prints the summary and
// spread lines of every row. It runs only when asked (RDMANET_BENCH=1).
func TestBurst(t *testing.T) {
	if os.Getenv("RDMANET_BENCH") != "1" {
		t.Skip("the burst benchmark runs with RDMANET_BENCH=1 (make bench-burst)")
	}
	pods, err := ParseInts(*flagPods)
	if err != nil {
		t.Fatalf("-burst.pods: %v", err)
	}
	rails, err := ParseInts(*flagRails)
	if err != nil {
		t.Fatalf("-burst.rails: %v", err)
	}
	impls := strings.Split(*flagImpls, ",")
	o := Options{Attempts: *flagAttempts, AddTimeout: *flagTimeout, MultusConnectionLimit: *flagConnLimit, RdmanetDaemonArgs: strings.Fields(*flagDaemon),
		Progress: func(s string) { fmt.Fprintln(os.Stderr, "bench-burst progress:", s) }}
	res := runBench(t, impls, pods, rails, *flagRuns, *flagVFs, o)
	for _, np := range pods {
		for _, m := range rails {
			for _, name := range impls {
				line, spread := Summarize(res[fmt.Sprintf("%s/%d/%d", name, np, m)])
				fmt.Println(line)
				fmt.Println(spread)
			}
		}
	}
}

// TestBurstSmoke: 4 pods × 1 rail (two of them on a VF, two on macvlan)
// through each impl, once; every pod attaches with eth0 and net1, the
// figures are measured (a daemon's RSS and goroutines are never 0), and
// everything is taken down (Row checks the VFs came home).
func TestBurstSmoke(t *testing.T) {
	o := Options{Attempts: 1}
	res := runBench(t, Impls, []int{4}, []int{1}, 1, 2, o)
	for _, name := range Impls {
		runs := res[name+"/4/1"]
		if len(runs) != 1 {
			t.Fatalf("%s: %d runs, want 1", name, len(runs))
		}
		r := runs[0]
		t.Log(r.Line())
		if len(r.Attach) != 4 || r.Failed != 0 || r.Unattached != 0 {
			t.Errorf("%s: %d of 4 pods attached, %d failed ADDs: want all 4 at the first ADD", name, len(r.Attach), r.Failed)
		}
		if r.PeakRSS <= 0 || r.Goroutines <= 0 || r.CPU <= 0 {
			t.Errorf("%s: peak RSS %d, goroutines %d, CPU %v: want each measured (> 0)", name, r.PeakRSS, r.Goroutines, r.CPU)
		}
	}
}
