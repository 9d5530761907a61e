package cni_test

import (
	"context"
	"fmt"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/rdmanet/rdmanet/internal/daemonclient"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/test/netnsutil"
	"github.com/rdmanet/rdmanet/test/pluginbin"
)

// EnvBench enables TestBenchChain (make bench-cni); EnvBenchRuns overrides the run count.
const (
	EnvBench     = "RDMANET_BENCH"
	EnvBenchRuns = "RDMANET_BENCH_RUNS"
)

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s)-1)*p + 0.5)
	return s[i]
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000) }

// TestBenchChain measures the seed NAD's full chain (sriov + rdma + IPAM,
// through libcni, plugin processes exec'd per call as a runtime does) on a
// simulated VF: ADD and DEL latency p50/p99 over sequential runs, then the
// wall time of 64 parallel ADDs (and DELs) over 64 VFs. It prints one
// "cni-bench:" line per figure. It is a measurement, not a pass/fail test.
func TestBenchChain(t *testing.T) {
	if os.Getenv(EnvBench) != "1" {
		t.Skipf("benchmark: run with %s=1 (make bench-cni)", EnvBench)
	}
	runs := 200
	if v, err := strconv.Atoi(os.Getenv(EnvBenchRuns)); err == nil && v > 0 {
		runs = v
	}
	const parallel = 64
	n := newNode(t, parallel)

	// Baseline: what exec'ing one Go plugin binary costs on this machine now
	// (CNI VERSION does no work), to read the chain's figures against.
	var execs []time.Duration
	for k := 0; k < 50; k++ {
		cmd := exec.Command(filepath.Join(binDir, "sriov"))
		cmd.Env = append(os.Environ(), "CNI_COMMAND=VERSION")
		cmd.Stdin = strings.NewReader(`{"cniVersion":"1.0.0"}`)
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("exec sriov VERSION: %v: %s", err, out)
		}
		execs = append(execs, time.Since(start))
	}
	fmt.Printf("cni-bench: baseline exec of one plugin binary (CNI VERSION) p50=%s p99=%s; load average %s\n",
		ms(percentile(execs, 0.5)), ms(percentile(execs, 0.99)), loadavg())

	pod := netnsutil.NewNS(t)
	noIPAM := `{"cniVersion":"1.0.0","name":"face-training-rdma","plugins":[{"type":"sriov","vlan":200,"spoofchk":"on","trust":"off"},{"type":"rdma"}]}`
	for _, series := range []struct {
		name, conf string
		base       int
	}{
		{name: "sriov+rdma+rdmanet-ipam (seed NAD)", conf: seedNAD, base: 1000},
		{name: "sriov+rdma (no IPAM)", conf: noIPAM, base: 5000},
	} {
		l := confList(t, series.conf, "1.0.0", vfBDF(0))
		var adds, dels []time.Duration
		for k := 0; k < runs; k++ {
			r := rt(series.base+k, pod)
			start := time.Now()
			if _, err := n.add(l, r); err != nil {
				t.Fatalf("%s run %d ADD: %v", series.name, k, err)
			}
			adds = append(adds, time.Since(start))
			start = time.Now()
			if err := n.del(l, r); err != nil {
				t.Fatalf("%s run %d DEL: %v", series.name, k, err)
			}
			dels = append(dels, time.Since(start))
		}
		n.assertRestored(t, 0, containerID(series.base+runs-1))
		fmt.Printf("cni-bench: chain=%s runs=%d ADD p50=%s p99=%s DEL p50=%s p99=%s\n",
			series.name, runs, ms(percentile(adds, 0.5)), ms(percentile(adds, 0.99)), ms(percentile(dels, 0.5)), ms(percentile(dels, 0.99)))
	}

	pods := make([]ns.NetNS, parallel)
	lists := make([]*libcni.NetworkConfigList, parallel)
	for i := range pods {
		pods[i] = netnsutil.NewNS(t)
		lists[i] = confList(t, seedNAD, "1.0.0", vfBDF(i))
	}
	wall := func(op func(i int) error) time.Duration {
		errs := make([]error, parallel)
		var wg sync.WaitGroup
		start := time.Now()
		for i := range parallel {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = op(i) }()
		}
		wg.Wait()
		d := time.Since(start)
		for i, err := range errs {
			if err != nil {
				t.Fatalf("parallel op on VF %d: %v", i, err)
			}
		}
		return d
	}
	addWall := wall(func(i int) error { _, err := n.add(lists[i], rt(i, pods[i])); return err })
	for i := range parallel {
		n.assertAttached(t, i, pods[i])
	}
	delWall := wall(func(i int) error { return n.del(lists[i], rt(i, pods[i])) })
	for i := range parallel {
		n.assertRestored(t, i, containerID(i))
	}
	fmt.Printf("cni-bench: %d parallel ADDs (one VF each) wall=%s; %d parallel DELs wall=%s; load average %s\n",
		parallel, ms(addWall), parallel, ms(delWall), loadavg())
}

// TestBenchChainForwarded measures the seed chain (sriov + rdma +
// rdmanet-ipam as whereabouts, through libcni) on one simulated VF in the
// three ways it can run, with the same stamped binaries: exec'd per call
// (no daemon), exec'd as thin clients of rdmanet-daemon's plugin socket,
// and in-process (what the meta daemon does with its delegates). It prints
// one "cni-bench:" line per way and the comparison, including the thin
// clients' own cost per forwarded call (their ADD latency less the
// in-process one, over the two forwarded plugins). make bench-cni.
func TestBenchChainForwarded(t *testing.T) {
	if os.Getenv(EnvBench) != "1" {
		t.Skipf("benchmark: run with %s=1 (make bench-cni)", EnvBench)
	}
	runs := 200
	if v, err := strconv.Atoi(os.Getenv(EnvBenchRuns)); err == nil && v > 0 {
		runs = v
	}
	// built as the image ships them (static): the dynamic loader alone
	// costs each exec about a millisecond here
	dir := filepath.Join(binDir, "shipped")
	if err := pluginbin.BuildWith(dir, pluginbin.Options{Tags: pluginbin.Test.Tags, VCS: true, Static: true},
		pluginbin.SRIOV, pluginbin.RDMA, pluginbin.IPAM, pluginbin.MetaDaemon); err != nil {
		t.Fatal(err)
	}
	n := newNode(t, 1)
	pod := netnsutil.NewNS(t)
	l := confList(t, seedNAD, "1.0.0", vfBDF(0))
	d := &pluginDaemon{t: t, n: n, bin: dir, socket: filepath.Join(n.root, "run", "plugins.sock"), log: filepath.Join(n.root, "daemon.log")}
	t.Cleanup(func() { d.stop(syscall.SIGTERM) })
	p50 := map[string]time.Duration{}
	for k, way := range []string{"per call", "thin clients of the daemon", "in-process"} {
		var exec invoke.Exec
		switch way {
		case "per call":
			t.Setenv(daemonclient.EnvSocket, "off")
		case "thin clients of the daemon":
			t.Setenv(daemonclient.EnvSocket, d.socket)
			d.start()
		case "in-process":
			t.Setenv(daemonclient.EnvSocket, "off")
			exec = inprocExec(t, dir)
		}
		c := libcni.NewCNIConfigWithCacheDir([]string{dir}, filepath.Join(n.root, fmt.Sprintf("cache-%d", k)), exec)
		var adds, dels []time.Duration
		for i := 0; i < runs; i++ {
			r := rt(10000*(k+1)+i, pod)
			var err error
			start := time.Now()
			_ = n.inHost(func() error { _, err = c.AddNetworkList(context.Background(), l, r); return nil })
			adds = append(adds, time.Since(start))
			if err != nil {
				t.Fatalf("%s ADD %d: %v", way, i, err)
			}
			start = time.Now()
			_ = n.inHost(func() error { err = c.DelNetworkList(context.Background(), l, r); return nil })
			dels = append(dels, time.Since(start))
			if err != nil {
				t.Fatalf("%s DEL %d: %v", way, i, err)
			}
		}
		n.assertRestored(t, 0, containerID(10000*(k+1)+runs-1))
		p50[way] = percentile(adds, 0.5)
		fmt.Printf("cni-bench: seed chain %s runs=%d ADD p50=%s p99=%s DEL p50=%s p99=%s\n",
			way, runs, ms(p50[way]), ms(percentile(adds, 0.99)), ms(percentile(dels, 0.5)), ms(percentile(dels, 0.99)))
	}
	if served := d.served("sriov", "ADD"); served != runs {
		t.Errorf("the daemon served %d sriov ADDs, want %d", served, runs)
	}
	thin, inproc, perCall := p50["thin clients of the daemon"], p50["in-process"], p50["per call"]
	fmt.Printf("cni-bench: seed chain ADD p50 per_call=%s thin_clients=%s in_process=%s thin_minus_in_process=%s forwarding_cost_per_plugin_call=%s (2 forwarded calls: sriov, rdma); load average %s\n",
		ms(perCall), ms(thin), ms(inproc), ms(thin-inproc), ms((thin-inproc)/2), loadavg())
}
