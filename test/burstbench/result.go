// Package burstbench is the attachment-burst benchmark (issue 32, item 1;
// `make bench-burst`): on one simulated node — real network namespaces,
// veth stand-ins for VFs (internal/sysfsfixture via test/sysfsfixture,
// RDMANET_NETOPS=record for what the machine lacks) and the real
// kube-apiserver + etcd of test/apiserver holding the pods and the
// NetworkAttachmentDefinitions — N pods × M networks ("rails") are attached
// at once, each pod's ADD exec'd through libcni as kubelet/containerd does,
// through one node daemon:
//
//	rdmanet  the real rdmanet-daemon and the `rdmanet` shim (daemonSocket)
//	multus   Multus v4.3.0 thick: the real multus-daemon and multus-shim
//	         (hack/build-multus-thick.sh), with the same delegates
//
// Rail r of a pod is an exclusive VF (the seed's sriov → rdma →
// rdmanet-ipam chain) while the fixture has VFs left, else macvlan over the
// rail's shared port with host-local IPAM; both impls get the same NADs,
// the same pods and the same default network (bridge + host-local).
//
// One line per row (impl, pods, rails): the median over the runs,
//
//	bench-burst: impl=<rdmanet|multus> pods=N rails=M p50_ms=… p99_ms=… failed=… peak_rss_mib=… goroutines=… cpu_ms_per_attach=…
//
// and one bench-burst-spread line with each figure's min–max over the runs.
// Definitions are in Result.
package burstbench

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Result is one run of one row.
type Result struct {
	Impl        string
	Pods, Rails int
	// Attach holds, per pod that attached, the time from the burst's start
	// (every pod's first ADD starts then) to the return of its successful
	// ADD, failed attempts and the pauses before retries included: what
	// the runtime waits for the pod's network.
	Attach []time.Duration
	// Failed counts the ADDs that returned an error (each failed attempt
	// of a pod once); Unattached the pods with no successful ADD at all.
	Failed, Unattached int
	// FailReasons counts the failed ADDs by FailReason.
	FailReasons map[string]int
	// PeakRSS is the daemon's VmHWM (bytes) at the end of the row's burst;
	// the daemon is started fresh for every row and run.
	PeakRSS int64
	// Goroutines is the highest go_goroutines the daemon's /metrics showed
	// while the burst ran (sampled every 50 ms).
	Goroutines int
	// CPU is the daemon's own utime+stime over the burst (/proc/<pid>/stat);
	// ChildCPU the CPU of the delegate processes it exec'd and waited for
	// (cutime+cstime) over the same time.
	CPU, ChildCPU time.Duration
	// Wall is the burst's duration: start to the last pod's ADD returning.
	Wall time.Duration
}

// Attachments is pods × rails: the networks attached beside the default one.
func (r Result) Attachments() int { return r.Pods * r.Rails }

// CPUPerAttach is the daemon's own CPU per attachment.
func (r Result) CPUPerAttach() time.Duration {
	if r.Attachments() == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Attachments())
}

// Line is the row's summary line (the format the issue asks for).
func (r Result) Line() string {
	return fmt.Sprintf("bench-burst: impl=%s pods=%d rails=%d p50_ms=%.1f p99_ms=%.1f failed=%d peak_rss_mib=%.1f goroutines=%d cpu_ms_per_attach=%.2f",
		r.Impl, r.Pods, r.Rails, ms(Percentile(r.Attach, 50)), ms(Percentile(r.Attach, 99)), r.Failed, mib(r.PeakRSS), r.Goroutines, ms(r.CPUPerAttach()))
}

// Percentile is the nearest-rank p-th percentile of d (0 for none): the
// smallest value with at least p % of the values at or below it, the
// definition every bench of this repository uses.
func Percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(i, 1)-1]
}

// figures of one run, in the order of the summary line
func figures(r Result) []float64 {
	return []float64{ms(Percentile(r.Attach, 50)), ms(Percentile(r.Attach, 99)), float64(r.Failed),
		mib(r.PeakRSS), float64(r.Goroutines), ms(r.CPUPerAttach())}
}

var figureNames = []string{"p50_ms", "p99_ms", "failed", "peak_rss_mib", "goroutines", "cpu_ms_per_attach"}

// Summarize turns the runs of one row into its summary line (each figure's
// median over the runs; failed is the sum, so one failure in any run
// shows) and its spread line (each figure's min–max over the runs, the
// ADDs refused by rdmanet-daemon's limit and those that ran out of the
// runtime's timeout, the unattached pods, the wall time of the bursts, and
// the delegates' CPU).
func Summarize(runs []Result) (line, spread string) {
	if len(runs) == 0 {
		return "", ""
	}
	r0 := runs[0]
	cols := make([][]float64, len(figureNames))
	var wall, child []float64
	failed, refused, timedOut, unattached := 0, 0, 0, 0
	for _, r := range runs {
		for i, f := range figures(r) {
			cols[i] = append(cols[i], f)
		}
		wall = append(wall, r.Wall.Seconds())
		if r.Attachments() > 0 {
			child = append(child, ms(r.ChildCPU)/float64(r.Attachments()))
		}
		failed += r.Failed
		refused += r.FailReasons[ReasonDaemonLimit]
		timedOut += r.FailReasons[ReasonAddTimeout]
		unattached += r.Unattached
	}
	med := make([]float64, len(cols))
	for i, c := range cols {
		med[i] = median(c)
	}
	line = fmt.Sprintf("bench-burst: impl=%s pods=%d rails=%d p50_ms=%.1f p99_ms=%.1f failed=%d peak_rss_mib=%.1f goroutines=%d cpu_ms_per_attach=%.2f",
		r0.Impl, r0.Pods, r0.Rails, med[0], med[1], failed, med[3], int(med[4]), med[5])
	var b strings.Builder
	fmt.Fprintf(&b, "bench-burst-spread: impl=%s pods=%d rails=%d runs=%d", r0.Impl, r0.Pods, r0.Rails, len(runs))
	for i, name := range figureNames {
		lo, hi := slices.Min(cols[i]), slices.Max(cols[i])
		fmt.Fprintf(&b, " %s=%s–%s", name, num(lo), num(hi))
	}
	fmt.Fprintf(&b, " refused=%d timed_out=%d unattached=%d wall_s=%s–%s", refused, timedOut, unattached, num(slices.Min(wall)), num(slices.Max(wall)))
	if len(child) > 0 {
		fmt.Fprintf(&b, " delegate_cpu_ms_per_attach=%s–%s", num(slices.Min(child)), num(slices.Max(child)))
	}
	return line, b.String()
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// num prints f with at most two decimals.
func num(f float64) string { return strconv.FormatFloat(math.Round(f*100)/100, 'f', -1, 64) }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// ReasonDaemonLimit is the FailReason of an ADD rdmanet-daemon refused at
// its limit on calls (CNI error 11, "try again later": the runtime
// retries): back-pressure, the "clear error past the queue", which
// the spread line counts apart as refused (of failed).
const ReasonDaemonLimit = "daemon-limit"

// ReasonAddTimeout is the FailReason of an ADD that ran out of
// Options.AddTimeout (kubelet's runtime-request-timeout).
const ReasonAddTimeout = "runtime-request-timeout"

// FailReason sorts a failed ADD's error into a short cause for the progress
// output: the PodResources call (kubelet's API) timing out, another
// timeout, or the error's first 100 characters.
func FailReason(err error) string {
	msg := err.Error()
	low := strings.ToLower(msg)
	switch {
	case strings.Contains(msg, "--max-inflight-calls"):
		return ReasonDaemonLimit
	case strings.Contains(low, "podresources") || strings.Contains(low, "pod resources"):
		if strings.Contains(low, "deadline") || strings.Contains(low, "timeout") {
			return "podresources-timeout"
		}
		return "podresources"
	case strings.Contains(low, "deadline exceeded") || strings.Contains(low, "timeout") || strings.Contains(low, "timed out"):
		return "timeout"
	}
	if len(msg) > 100 {
		msg = msg[:100]
	}
	return msg
}

// ParseInts reads a comma-separated list of positive integers ("64,128").
func ParseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q in list %q: want a positive integer", f, s)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty list %q: want positive integers separated by commas, e.g. 64,128", s)
	}
	return out, nil
}
