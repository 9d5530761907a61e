package fleetbench

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// Figures are a Result's derived numbers.
type Figures struct {
	SteadyWritesPerNodeMin, SteadyRequestsPerNodeMin, SteadyBytesPerNodeMin float64
	ServerWritesPerNodeMin, ServerBytesPerNodeMin                           float64
	WatchesPerNode, ServerWatchesPerNode                                    float64
	// Per device-plugin pod start: all rdmanet writes, those of the CNI
	// path (daemon: IPAM, network-status) and of the agent (the publisher's
	// device-plugin in-use taint).
	WritesPerPodStart, CNIWritesPerDPPod, AgentWritesPerDPPod float64
	WritesPerDRAPod, RequestsPerDPPod, RequestsPerDRAPod      float64
	SliceWritesPerFlap                                        float64
}

// Figures derives the per-node and per-pod figures.
func (r *Result) Figures() Figures {
	var f Figures
	all := func(Key) bool { return true }
	w := r.Steady
	f.SteadyWritesPerNodeMin = PerNodeMinute(float64(w.Node.Writes()), r.Nodes, w.Duration)
	f.SteadyRequestsPerNodeMin = PerNodeMinute(float64(w.Node.Sum(all)), r.Nodes, w.Duration)
	f.SteadyBytesPerNodeMin = PerNodeMinute(float64(w.Node.BytesIn+w.Node.BytesOut), r.Nodes, w.Duration)
	// kube-apiserver renews its own identity Lease every 10 s; nodes write no Lease.
	f.ServerWritesPerNodeMin = PerNodeMinute(w.Server.Writes(func(res string) bool { return res != "leases" }), r.Nodes, w.Duration)
	var sb float64
	for _, v := range w.Server.ResponseBytes {
		sb += v
	}
	for _, v := range w.Server.WatchEventBytes {
		sb += v
	}
	f.ServerBytesPerNodeMin = PerNodeMinute(sb, r.Nodes, w.Duration)
	if r.Nodes > 0 {
		f.WatchesPerNode = float64(w.NodeWatches) / float64(r.Nodes)
		f.ServerWatchesPerNode = w.ServerWatches / float64(r.Nodes)
	}
	j := r.Job
	if j.DPPods > 0 {
		f.CNIWritesPerDPPod = float64(j.DP.Writes()) / float64(j.DPPods)
		f.AgentWritesPerDPPod = float64(j.Agent.Writes()) / float64(j.DPPods)
		f.WritesPerPodStart = f.CNIWritesPerDPPod + f.AgentWritesPerDPPod
		f.RequestsPerDPPod = float64(j.DP.Sum(all)+j.Agent.Sum(all)) / float64(j.DPPods)
	}
	if j.DRAPods > 0 {
		f.WritesPerDRAPod = float64(j.DRA.Writes()) / float64(j.DRAPods)
		f.RequestsPerDRAPod = float64(j.DRA.Sum(all)) / float64(j.DRAPods)
	}
	if r.Flap.Changes > 0 {
		f.SliceWritesPerFlap = float64(r.Flap.SliceWrites) / float64(r.Flap.Changes)
	}
	return f
}

// Line is the one summary line of a size. bytesPerAddress is the
// controller's memory slope over the sizes (0: not known).
func (r *Result) Line(bytesPerAddress float64) string {
	f := r.Figures()
	rss, addrs, gc := 0.0, 0, 0.0
	if c := r.Controller; c != nil {
		rss, addrs, gc = float64(c.RSS)/(1<<20), c.Addresses, c.GCLatency.Seconds()
	}
	return fmt.Sprintf("bench-fleet: nodes=%d steady_writes_per_node_min=%.3f writes_per_pod_start=%.2f slice_writes_per_flap=%.2f controller_rss_mib=%.1f"+
		" steady_requests_per_node_min=%.2f steady_bytes_per_node_min=%.0f server_writes_per_node_min=%.3f server_bytes_per_node_min=%.0f watches_per_node=%.2f server_watches=%.0f"+
		" cni_writes_per_dp_pod=%.2f agent_writes_per_dp_pod=%.2f writes_per_dra_pod_start=%.2f requests_per_dp_pod=%.2f requests_per_dra_pod=%.2f job_pods=%d job_failed=%d job_wall_s=%.1f"+
		" flap_writes_all_nodes=%d controller_addresses=%d controller_peak_rss_mib=%.1f controller_bytes_per_address=%.0f gc_dead_node_s=%.1f startup_s=%.0f"+
		" node_heap_kib=%.0f node_goroutines=%.1f sim_rss_mib=%.0f",
		r.Nodes, f.SteadyWritesPerNodeMin, f.WritesPerPodStart, f.SliceWritesPerFlap, rss,
		f.SteadyRequestsPerNodeMin, f.SteadyBytesPerNodeMin, f.ServerWritesPerNodeMin, f.ServerBytesPerNodeMin, f.WatchesPerNode, r.Steady.ServerWatches,
		f.CNIWritesPerDPPod, f.AgentWritesPerDPPod, f.WritesPerDRAPod, f.RequestsPerDPPod, f.RequestsPerDRAPod, r.Job.Pods, r.Job.Failed, r.Job.Wall.Seconds(),
		r.Flap.Writes, addrs, peakMiB(r.Controller), bytesPerAddress, gc, r.StartupS,
		r.Memory.HeapPerNode/1024, r.Memory.GoroutinesPerNode, float64(r.Memory.RSS)/(1<<20))
}

func peakMiB(c *ControllerResult) float64 {
	if c == nil {
		return 0
	}
	return float64(c.PeakRSS) / (1 << 20)
}

// BytesPerAddress is the controller's RSS slope between two runs.
func BytesPerAddress(a, b *ControllerResult) float64 {
	if a == nil || b == nil || a.Addresses == b.Addresses {
		return 0
	}
	return float64(b.RSS-a.RSS) / float64(b.Addresses-a.Addresses)
}

// Details writes the breakdowns behind a Line (verbs and resources).
func (r *Result) Details(w io.Writer) {
	p := func(name, s string) { fmt.Fprintf(w, "bench-fleet-detail: nodes=%d %s %s\n", r.Nodes, name, s) }
	p("steady_node_requests", Verbs(r.Steady.Node, 0))
	p("steady_node_failed", FailedVerbs(r.Steady.Node))
	p("steady_server_requests", serverVerbs(r.Steady.Server.Requests))
	p("steady_server_watch_event_bytes", serverRes(r.Steady.Server.WatchEventBytes))
	var writers []string
	for n, c := range r.Steady.WritesByNode {
		writers = append(writers, fmt.Sprintf("%s=%d", n, c))
	}
	sort.Strings(writers)
	p("steady_writing_nodes", strings.Join(writers, ","))
	var fv []string
	for k, v := range r.Flap.WritesByVerbs {
		fv = append(fv, fmt.Sprintf("%s=%d", strings.ReplaceAll(k, " ", ":"), v))
	}
	sort.Strings(fv)
	p("flap_writes", fmt.Sprintf("node=%s device=%s changes=%d %s latencies=%v", r.Flap.Node, r.Flap.Device, r.Flap.Changes, strings.Join(fv, ","), r.Flap.Latencies))
	if r.Job.DPPods > 0 {
		p("per_dp_pod_daemon", Verbs(r.Job.DP, float64(r.Job.DPPods)))
		p("per_dp_pod_agent", Verbs(r.Job.Agent, float64(r.Job.DPPods)))
		p("job_agent_failed", FailedVerbs(r.Job.Agent))
	}
	if r.Job.DRAPods > 0 {
		p("per_dra_pod_daemon", Verbs(r.Job.DRA, float64(r.Job.DRAPods)))
	}
	if r.Job.Pods > 0 {
		p("job_server_requests", serverVerbs(r.Job.Server.Requests))
	}
	if c := r.Controller; c != nil {
		p("controller", fmt.Sprintf("addresses=%d pods=%d blocks=%d rss_bytes=%d peak_rss_bytes=%d sync_s=%.1f gc_released=%d gc_latency_s=%.1f (quarantine %s included)",
			c.Addresses, c.Pods, c.Blocks, c.RSS, c.PeakRSS, c.SyncS, c.GCReleased, c.GCLatency.Seconds(), nodeQuarantine))
	}
}

func serverVerbs(m map[VerbResource]float64) string {
	keys := make([]VerbResource, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool { return keys[a].String() < keys[b].String() })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s:%s=%.0f", k.Verb, k.Resource, m[k]))
	}
	return strings.Join(parts, ",")
}

func serverRes(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%.0f", k, m[k]))
	}
	return strings.Join(parts, ",")
}

// Verbs lists counts by "VERB resource", largest first, as "k=v" pairs.
func Verbs(c Counts, per float64) string {
	m := map[string]int64{}
	for k, v := range c.Requests {
		m[k.Verb+" "+k.Resource] += v
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		if m[keys[a]] != m[keys[b]] {
			return m[keys[a]] > m[keys[b]]
		}
		return keys[a] < keys[b]
	})
	var parts []string
	for _, k := range keys {
		if per > 0 {
			parts = append(parts, fmt.Sprintf("%s=%.3g", strings.ReplaceAll(k, " ", ":"), float64(m[k])/per))
		} else {
			parts = append(parts, fmt.Sprintf("%s=%d", strings.ReplaceAll(k, " ", ":"), m[k]))
		}
	}
	return strings.Join(parts, ",")
}

// FailedVerbs lists the failed requests as "VERB:resource:code=n", by count.
func FailedVerbs(c Counts) string {
	keys := make([]FailKey, 0, len(c.Failed))
	for k := range c.Failed {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		if c.Failed[keys[a]] != c.Failed[keys[b]] {
			return c.Failed[keys[a]] > c.Failed[keys[b]]
		}
		return fmt.Sprint(keys[a]) < fmt.Sprint(keys[b])
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s:%s:%d=%d", k.Verb, k.Resource, k.Code, c.Failed[k]))
	}
	return strings.Join(parts, ",")
}
