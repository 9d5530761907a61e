package fleetbench

import (
	"bufio"
	"context"
	"io"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name, method, path, query, ctype string
		verb, resource                   string
		ok                               bool
	}{
		{name: "get a pod", method: "GET", path: "/api/v1/namespaces/train/pods/p1", verb: VerbGet, resource: "pods", ok: true},
		{name: "list pods of a node", method: "GET", path: "/api/v1/pods", query: "fieldSelector=spec.nodeName%3Dn&limit=500", verb: VerbList, resource: "pods", ok: true},
		{name: "watch pods", method: "GET", path: "/api/v1/pods", query: "allowWatchBookmarks=true&watch=true", verb: VerbWatch, resource: "pods", ok: true},
		{name: "deprecated watch prefix", method: "GET", path: "/api/v1/watch/namespaces/a/pods", verb: VerbWatch, resource: "pods", ok: true},
		{name: "network-status patch", method: "PATCH", path: "/api/v1/namespaces/train/pods/p1/status", ctype: "application/merge-patch+json", verb: VerbPatch, resource: "pods/status", ok: true},
		{name: "claim status apply", method: "PATCH", path: "/apis/resource.k8s.io/v1/namespaces/train/resourceclaims/c/status", ctype: "application/apply-patch+yaml", verb: VerbApply, resource: "resourceclaims/status", ok: true},
		{name: "block update", method: "PUT", path: "/apis/rdmanet.io/v1alpha1/ipamblocks/b1", verb: VerbUpdate, resource: "ipamblocks", ok: true},
		{name: "slice create", method: "POST", path: "/apis/resource.k8s.io/v1/resourceslices", verb: VerbCreate, resource: "resourceslices", ok: true},
		{name: "namespace get is the Namespace", method: "GET", path: "/api/v1/namespaces/train", verb: VerbGet, resource: "namespaces", ok: true},
		{name: "delete collection", method: "DELETE", path: "/apis/resource.k8s.io/v1/resourceslices", verb: VerbDeleteCollection, resource: "resourceslices", ok: true},
		{name: "token request", method: "POST", path: "/api/v1/namespaces/s/serviceaccounts/sa/token", verb: VerbCreate, resource: "serviceaccounts/token", ok: true},
		{name: "metrics are no resource", method: "GET", path: "/metrics"},
		{name: "discovery is no resource", method: "GET", path: "/apis/resource.k8s.io/v1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			verb, res, ok := Classify(tt.method, tt.path, tt.query, tt.ctype)
			if ok != tt.ok || ok && (verb != tt.verb || res != tt.resource) {
				t.Fatalf("Classify = %q %q %v, want %q %q %v", verb, res, ok, tt.verb, tt.resource, tt.ok)
			}
		})
	}
}

const metricsPage = `# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="resource.k8s.io",resource="resourceslices",scope="cluster",subresource="",verb="LIST",version="v1"} 10
apiserver_request_total{code="200",component="apiserver",dry_run="",group="resource.k8s.io",resource="resourceslices",scope="cluster",subresource="",verb="PUT",version="v1"} 4
apiserver_request_total{code="201",component="apiserver",dry_run="",group="resource.k8s.io",resource="resourceslices",scope="cluster",subresource="",verb="POST",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 7
apiserver_request_total{code="429",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="",scope="",subresource="/metrics",verb="GET",version=""} 99
apiserver_response_sizes_sum{component="apiserver",group="resource.k8s.io",resource="resourceslices",scope="cluster",subresource="",verb="LIST",version="v1"} 123456
apiserver_response_sizes_count{component="apiserver",group="resource.k8s.io",resource="resourceslices",scope="cluster",subresource="",verb="LIST",version="v1"} 10
apiserver_watch_events_sizes_sum{group="resource.k8s.io",resource="resourceslices",version="v1"} 5000
apiserver_watch_events_total{group="resource.k8s.io",resource="resourceslices",version="v1"} 3
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="cluster",subresource="",verb="WATCH",version="v1"} 2000
apiserver_longrunning_requests{component="apiserver",group="resource.k8s.io",resource="resourceslices",scope="cluster",subresource="",verb="WATCH",version="v1"} 1000
apiserver_registered_watchers{group="resource.k8s.io",kind="ResourceSlice",version="v1"} 1000
apiserver_request_duration_seconds_bucket{verb="LIST",resource="pods",le="0.1"} 5
`

func TestParseServerMetrics(t *testing.T) {
	m := ParseServerMetrics([]byte(metricsPage))
	tests := []struct {
		name      string
		got, want float64
	}{
		{"LIST resourceslices", m.Requests[VerbResource{VerbList, "resourceslices"}], 10},
		{"PUT counts as UPDATE", m.Requests[VerbResource{VerbUpdate, "resourceslices"}], 4},
		{"POST counts as CREATE", m.Requests[VerbResource{VerbCreate, "resourceslices"}], 2},
		{"all codes of PATCH pods/status", m.Requests[VerbResource{VerbPatch, "pods/status"}], 8},
		{"429s by code", m.Codes["429"], 1},
		{"reads of /metrics are left out", float64(len(m.Requests)), 4},
		{"writes", m.Writes(nil), 14},
		{"writes of slices", m.Writes(func(r string) bool { return r == "resourceslices" }), 6},
		{"response bytes", m.ResponseBytes[VerbResource{VerbList, "resourceslices"}], 123456},
		{"watch event bytes", m.WatchEventBytes["resourceslices"], 5000},
		{"watch events", m.WatchEvents["resourceslices"], 3},
		{"open watches", m.OpenWatches(), 3000},
		{"registered watchers", m.Watchers["ResourceSlice.resource.k8s.io"], 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Fatalf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
	later := ParseServerMetrics([]byte(strings.Replace(metricsPage, `verb="PUT",version="v1"} 4`, `verb="PUT",version="v1"} 9`, 1)))
	d := later.Sub(m)
	if len(d.Requests) != 1 || d.Requests[VerbResource{VerbUpdate, "resourceslices"}] != 5 || d.OpenWatches() != 3000 {
		t.Fatalf("Sub = %+v (open watches %v), want only UPDATE resourceslices=5 and the gauges", d.Requests, d.OpenWatches())
	}
}

func TestPerNodeMinute(t *testing.T) {
	tests := []struct {
		name  string
		n     float64
		nodes int
		d     time.Duration
		want  float64
	}{
		{"1000 nodes, 2 minutes", 6000, 1000, 2 * time.Minute, 3},
		{"half a minute", 10, 5, 30 * time.Second, 4},
		{"no nodes", 10, 0, time.Minute, 0},
		{"no time", 10, 5, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PerNodeMinute(tt.n, tt.nodes, tt.d); math.Abs(got-tt.want) > 1e-9 {
				t.Fatalf("PerNodeMinute = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestCounter sends requests through a Counter's transport to a test
// server: requests by tag, verb and resource, bytes both ways, watches
// open until their body is closed, 429s as errors.
func TestCounter(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") == "true" {
			_, _ = io.WriteString(w, `{"type":"ADDED"}`)
			return
		}
		if r.Method == http.MethodPatch && strings.HasSuffix(r.URL.Path, "/status") {
			w.WriteHeader(http.StatusTooManyRequests)
		}
		_, _ = io.WriteString(w, "0123456789")
	}))
	defer srv.Close()
	c := NewCounter()
	client := &http.Client{Transport: c.Wrap(http.DefaultTransport)}
	do := func(ctx context.Context, method, path, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	drain := func(r *http.Response) { _, _ = io.Copy(io.Discard, r.Body); _ = r.Body.Close() }
	before := c.Snapshot()
	drain(do(context.Background(), "GET", "/api/v1/namespaces/a/pods/p", ""))
	drain(do(WithTag(context.Background(), TagDPPod), "PUT", "/apis/rdmanet.io/v1alpha1/ipamblocks/b", "abcde"))
	drain(do(WithTag(context.Background(), TagDPPod), "PATCH", "/api/v1/namespaces/a/pods/p/status", "xy"))
	w := do(context.Background(), "GET", "/api/v1/pods?watch=true", "")
	if got := c.WatchesOpen(); got != 1 {
		t.Fatalf("watches open = %d, want 1", got)
	}
	drain(w)
	if got := c.WatchesOpen(); got != 0 {
		t.Fatalf("watches open after close = %d, want 0", got)
	}
	d := c.Snapshot().Sub(before)
	want := map[Key]int64{
		{Verb: VerbGet, Resource: "pods"}:                         1,
		{Tag: TagDPPod, Verb: VerbUpdate, Resource: "ipamblocks"}: 1,
		{Tag: TagDPPod, Verb: VerbPatch, Resource: "pods/status"}: 1,
		{Verb: VerbWatch, Resource: "pods"}:                       1,
	}
	if len(d.Requests) != len(want) {
		t.Fatalf("requests %v, want %v", d.Requests, want)
	}
	for k, v := range want {
		if d.Requests[k] != v {
			t.Errorf("%+v = %d, want %d", k, d.Requests[k], v)
		}
	}
	if want := map[FailKey]int64{{Verb: VerbPatch, Resource: "pods/status", Code: http.StatusTooManyRequests}: 1}; !maps.Equal(d.Failed, want) {
		t.Errorf("failed %v, want %v", d.Failed, want)
	}
	if d.Writes() != 2 || d.BytesOut != 7 || d.BytesIn != 30+int64(len(`{"type":"ADDED"}`)) || d.Errors != 1 {
		t.Fatalf("writes %d bytes out %d in %d errors %d; want 2, 7, %d, 1", d.Writes(), d.BytesOut, d.BytesIn, 30+len(`{"type":"ADDED"}`), d.Errors)
	}
}

func TestParseProcStatus(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		rss, peak int64
		wantErr   bool
	}{
		{name: "both", in: "Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\nThreads:\t4\n", rss: 1 << 20, peak: 2 << 20},
		{name: "no VmRSS", in: "Name:\tx\n", wantErr: true},
		{name: "not kB", in: "VmRSS:\t1 MB\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rss, peak, err := ParseProcStatus(bufio.NewScanner(strings.NewReader(tt.in)))
			if (err != nil) != tt.wantErr || rss != tt.rss || peak != tt.peak {
				t.Fatalf("= %d %d %v, want %d %d err %v", rss, peak, err, tt.rss, tt.peak, tt.wantErr)
			}
		})
	}
}

// TestFigures derives the summary figures of a made-up result.
func TestFigures(t *testing.T) {
	r := &Result{Nodes: 100,
		Steady: Window{Duration: 2 * time.Minute, NodeWatches: 300,
			Node:   Counts{Requests: map[Key]int64{{Verb: VerbGet, Resource: "nodes"}: 400, {Verb: VerbUpdate, Resource: "resourceslices"}: 20}, BytesIn: 2000, BytesOut: 400},
			Server: ServerMetrics{Requests: map[VerbResource]float64{{VerbUpdate, "resourceslices"}: 20, {VerbUpdate, "leases"}: 12}}},
		Flap: Flap{Changes: 2, SliceWrites: 2},
		Job: Job{Pods: 40, DPPods: 30, DRAPods: 10,
			DP:    Counts{Requests: map[Key]int64{{Tag: TagDPPod, Verb: VerbUpdate, Resource: "ipamblocks"}: 30, {Tag: TagDPPod, Verb: VerbPatch, Resource: "pods/status"}: 30, {Tag: TagDPPod, Verb: VerbList, Resource: "ipamblocks"}: 30}},
			DRA:   Counts{Requests: map[Key]int64{{Tag: TagDRAPod, Verb: VerbUpdate, Resource: "ipamblocks"}: 10, {Tag: TagDRAPod, Verb: VerbPatch, Resource: "pods/status"}: 10, {Tag: TagDRAPod, Verb: VerbApply, Resource: "resourceclaims/status"}: 10}},
			Agent: Counts{Requests: map[Key]int64{{Verb: VerbUpdate, Resource: "resourceslices"}: 15}}},
		Controller: &ControllerResult{Addresses: 1000, RSS: 50 << 20},
	}
	f := r.Figures()
	tests := []struct {
		name      string
		got, want float64
	}{
		{"steady writes per node-minute", f.SteadyWritesPerNodeMin, 0.1},
		{"steady requests per node-minute", f.SteadyRequestsPerNodeMin, 2.1},
		{"steady bytes per node-minute", f.SteadyBytesPerNodeMin, 12},
		{"server writes per node-minute leave the API server's own lease out", f.ServerWritesPerNodeMin, 0.1},
		{"watches per node", f.WatchesPerNode, 3},
		{"slice writes per device change", f.SliceWritesPerFlap, 1},
		{"CNI writes per device-plugin pod", f.CNIWritesPerDPPod, 2},
		{"agent writes per device-plugin pod", f.AgentWritesPerDPPod, 0.5},
		{"writes per pod start", f.WritesPerPodStart, 2.5},
		{"writes per DRA pod", f.WritesPerDRAPod, 3},
		{"requests per device-plugin pod", f.RequestsPerDPPod, 3.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if math.Abs(tt.got-tt.want) > 1e-9 {
				t.Fatalf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
	if got, want := BytesPerAddress(&ControllerResult{Addresses: 1000, RSS: 10 << 20}, &ControllerResult{Addresses: 3000, RSS: 12 << 20}), float64(2<<20)/2000; got != want {
		t.Fatalf("BytesPerAddress = %v, want %v", got, want)
	}
	line := r.Line(0)
	for _, want := range []string{"bench-fleet: nodes=100 steady_writes_per_node_min=0.100 writes_per_pod_start=2.50 slice_writes_per_flap=1.00 controller_rss_mib=50.0 "} {
		if !strings.HasPrefix(line, want) {
			t.Fatalf("Line = %q, want prefix %q", line, want)
		}
	}
}
