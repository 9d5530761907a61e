package burstbench

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"
)

func msd(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

func TestPercentile(t *testing.T) {
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100..1, unsorted
	}
	for _, c := range []struct {
		name string
		in   []time.Duration
		p    int
		want time.Duration
	}{
		{"none", nil, 50, 0},
		{"one value is every percentile", msd(7), 99, 7 * time.Millisecond},
		{"p50 of 4 is the 2nd (nearest rank)", msd(40, 10, 30, 20), 50, 20 * time.Millisecond},
		{"p99 of 4 is the largest", msd(40, 10, 30, 20), 99, 40 * time.Millisecond},
		{"p99 of 100 is the 99th", msd(hundred...), 99, 99 * time.Millisecond},
		{"p50 of 100 is the 50th", msd(hundred...), 50, 50 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Percentile(c.in, c.p); got != c.want {
				t.Errorf("Percentile(%v, %d) = %v, want %v", c.in, c.p, got, c.want)
			}
		})
	}
}

// lineRE is the line, exactly: these keys in this order, nothing else.
var lineRE = regexp.MustCompile(`^bench-burst: impl=(rdmanet|multus) pods=\d+ rails=\d+ p50_ms=\d+\.\d p99_ms=\d+\.\d failed=\d+ peak_rss_mib=\d+\.\d goroutines=\d+ cpu_ms_per_attach=\d+\.\d\d$`)

func TestLine(t *testing.T) {
	r := Result{Impl: "rdmanet", Pods: 4, Rails: 2, Attach: msd(10, 20, 30, 40), Failed: 1,
		PeakRSS: 48 << 20, Goroutines: 77, CPU: 120 * time.Millisecond}
	want := "bench-burst: impl=rdmanet pods=4 rails=2 p50_ms=20.0 p99_ms=40.0 failed=1 peak_rss_mib=48.0 goroutines=77 cpu_ms_per_attach=15.00"
	if got := r.Line(); got != want {
		t.Errorf("Line() =\n%s\nwant\n%s", got, want)
	}
	if !lineRE.MatchString(r.Line()) {
		t.Errorf("Line() %q does not match the issue's format %s", r.Line(), lineRE)
	}
}

func TestSummarize(t *testing.T) {
	runs := []Result{
		{Impl: "multus", Pods: 2, Rails: 1, Attach: msd(10, 30), PeakRSS: 30 << 20, Goroutines: 50, CPU: 20 * time.Millisecond, Wall: time.Second},
		{Impl: "multus", Pods: 2, Rails: 1, Attach: msd(20, 50), Failed: 2, FailReasons: map[string]int{ReasonDaemonLimit: 1, ReasonAddTimeout: 1}, Unattached: 1, PeakRSS: 40 << 20, Goroutines: 70, CPU: 40 * time.Millisecond, ChildCPU: 100 * time.Millisecond, Wall: 2 * time.Second},
		{Impl: "multus", Pods: 2, Rails: 1, Attach: msd(15, 40), PeakRSS: 35 << 20, Goroutines: 60, CPU: 30 * time.Millisecond, Wall: 3 * time.Second},
	}
	line, spread := Summarize(runs)
	wantLine := "bench-burst: impl=multus pods=2 rails=1 p50_ms=15.0 p99_ms=40.0 failed=2 peak_rss_mib=35.0 goroutines=60 cpu_ms_per_attach=15.00"
	if line != wantLine {
		t.Errorf("summary line\n%s\nwant (medians, failed summed)\n%s", line, wantLine)
	}
	if !lineRE.MatchString(line) {
		t.Errorf("summary line %q does not match the issue's format", line)
	}
	wantSpread := "bench-burst-spread: impl=multus pods=2 rails=1 runs=3 p50_ms=10–20 p99_ms=30–50 failed=0–2 peak_rss_mib=30–40 goroutines=50–70 cpu_ms_per_attach=10–20 refused=1 timed_out=1 unattached=1 wall_s=1–3 delegate_cpu_ms_per_attach=0–50"
	if spread != wantSpread {
		t.Errorf("spread line\n%s\nwant\n%s", spread, wantSpread)
	}
	if l, s := Summarize(nil); l != "" || s != "" {
		t.Errorf("Summarize(nil) = %q, %q, want nothing", l, s)
	}
}

func TestParseInts(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{"64,128, 256,512", []int{64, 128, 256, 512}, false},
		{"4", []int{4}, false},
		{"", nil, true},
		{"64,x", nil, true},
		{"0", nil, true},
	} {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseInts(c.in)
			if (err != nil) != c.wantErr || len(got) != len(c.want) {
				t.Fatalf("ParseInts(%q) = %v, %v", c.in, got, err)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("ParseInts(%q) = %v, want %v", c.in, got, c.want)
				}
			}
		})
	}
}

func TestPlan(t *testing.T) {
	got := Plan(3, 2, 3)
	want := [][]int{{0, 1}, {2, -1}, {-1, -1}}
	for p := range want {
		for r := range want[p] {
			if got[p][r] != want[p][r] {
				t.Fatalf("Plan(3 pods, 2 rails, 3 VFs) = %v, want %v", got, want)
			}
		}
	}
}

func TestParseStat(t *testing.T) {
	// the name may hold spaces and parentheses; fields 14–17 are 150 25 300 40 ticks
	stat := []byte("4242 (multus (x) d) S 1 4242 4242 0 -1 4194560 100 0 0 0 150 25 300 40 20 0 12 0 100 1000 200\n")
	var s ProcStat
	if err := parseStat(stat, &s); err != nil {
		t.Fatal(err)
	}
	if s.CPU != 1750*time.Millisecond || s.ChildCPU != 3400*time.Millisecond {
		t.Errorf("CPU %v, children %v; want 1.75s and 3.4s", s.CPU, s.ChildCPU)
	}
	if err := parseStat([]byte("1 (x) S 1 2"), &s); err == nil {
		t.Error("a short stat line parsed without error")
	}
	hwm, err := statusKB([]byte("Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t 1024 kB\n"), "VmHWM:")
	if err != nil || hwm != 2048<<10 {
		t.Errorf("VmHWM = %d, %v; want 2 MiB", hwm, err)
	}
}

func TestFailReason(t *testing.T) {
	for _, c := range []struct{ name, err, want string }{
		{"rdmanet's PodResources Get", `plugin type="rdmanet" failed (add): pod ns/p: kubelet PodResources Get ns/p on /x.sock: rpc error: code = DeadlineExceeded desc = context deadline exceeded`, "podresources-timeout"},
		{"Multus' PodResources List", `CmdAdd (shim): ... getPodResources: failed to list pod resources, ... rpc error: code = DeadlineExceeded desc = context deadline exceeded`, "podresources-timeout"},
		{"rdmanet-daemon's limit on calls", `plugin type="rdmanet" failed (add): rdmanet daemon: ADD of container c refused, try again later: the rdmanet daemon has 48 ADD/CHECK calls in flight, the most it runs (--max-inflight-calls=64 less the 16 slots --del-reserved-calls keeps for DEL) and 256 more waiting (--max-queued-calls=256)`, "daemon-limit"},
		{"another timeout", `ADD ns/p: stopped at the call's time limit (context deadline exceeded)`, "timeout"},
		{"anything else, cut", strings.Repeat("x", 150), strings.Repeat("x", 100)},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := FailReason(errors.New(c.err)); got != c.want {
				t.Errorf("FailReason(%q) = %q, want %q", c.err, got, c.want)
			}
		})
	}
}
