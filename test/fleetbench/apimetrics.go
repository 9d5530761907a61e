package fleetbench

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// ServerMetrics is what the API server's own /metrics says about the
// requests it served: counters (requests, response bytes, watch event
// bytes) and gauges (long-running requests, registered watchers).
type ServerMetrics struct {
	// Requests: apiserver_request_total by verb and resource[/sub]
	// (POST and PUT as CREATE and UPDATE), all codes.
	Requests map[VerbResource]float64
	// Codes: apiserver_request_total by code ("429", "500", ...).
	Codes map[string]float64
	// ResponseBytes: apiserver_response_sizes_sum by verb and resource
	// (the replies of non-streaming requests).
	ResponseBytes map[VerbResource]float64
	// WatchEventBytes: apiserver_watch_events_sizes_sum by resource (bytes
	// sent on watch streams; keyed by the kind's resource label).
	WatchEventBytes map[string]float64
	// WatchEvents: apiserver_watch_events_total by resource.
	WatchEvents map[string]float64
	// LongRunning: apiserver_longrunning_requests by verb and resource
	// (open watches are verb WATCH).
	LongRunning map[VerbResource]float64
	// Watchers: apiserver_registered_watchers by kind (absent on servers
	// that no longer export it).
	Watchers map[string]float64
}

// VerbResource is a verb and a resource[/subresource].
type VerbResource struct{ Verb, Resource string }

func (v VerbResource) String() string { return v.Verb + " " + v.Resource }

var metricLabelRe = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)

// ParseServerMetrics reads the families ServerMetrics holds from a
// Prometheus text page; other lines are ignored, as are reads of /metrics.
func ParseServerMetrics(raw []byte) ServerMetrics {
	m := ServerMetrics{Requests: map[VerbResource]float64{}, Codes: map[string]float64{}, ResponseBytes: map[VerbResource]float64{},
		WatchEventBytes: map[string]float64{}, WatchEvents: map[string]float64{}, LongRunning: map[VerbResource]float64{}, Watchers: map[string]float64{}}
	for _, line := range strings.Split(string(raw), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		brace := strings.IndexByte(line, '{')
		end := strings.LastIndexByte(line, '}')
		if brace < 0 || end < brace {
			continue
		}
		name := line[:brace]
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			continue
		}
		l := map[string]string{}
		for _, mm := range metricLabelRe.FindAllStringSubmatch(line[brace:end], -1) {
			l[mm[1]] = mm[2]
		}
		if strings.Contains(l["subresource"], "/metrics") || l["resource"] == "" && name != "apiserver_registered_watchers" {
			continue
		}
		res := l["resource"]
		if l["subresource"] != "" {
			res += "/" + l["subresource"]
		}
		vr := VerbResource{Verb: serverVerb(l["verb"]), Resource: res}
		switch name {
		case "apiserver_request_total":
			m.Requests[vr] += v
			m.Codes[l["code"]] += v
		case "apiserver_response_sizes_sum":
			m.ResponseBytes[vr] += v
		case "apiserver_watch_events_sizes_sum":
			m.WatchEventBytes[res] += v
		case "apiserver_watch_events_total":
			m.WatchEvents[res] += v
		case "apiserver_longrunning_requests":
			m.LongRunning[vr] += v
		case "apiserver_registered_watchers":
			k := l["kind"]
			if l["group"] != "" {
				k += "." + l["group"]
			}
			m.Watchers[k] += v
		}
	}
	return m
}

func serverVerb(v string) string {
	switch v {
	case "POST":
		return VerbCreate
	case "PUT":
		return VerbUpdate
	}
	return v
}

// Sub returns the counters of m less those of old; gauges are m's.
func (m ServerMetrics) Sub(old ServerMetrics) ServerMetrics {
	sub := func(a, b map[VerbResource]float64) map[VerbResource]float64 {
		out := map[VerbResource]float64{}
		for k, v := range a {
			if d := v - b[k]; d != 0 {
				out[k] = d
			}
		}
		return out
	}
	subS := func(a, b map[string]float64) map[string]float64 {
		out := map[string]float64{}
		for k, v := range a {
			if d := v - b[k]; d != 0 {
				out[k] = d
			}
		}
		return out
	}
	return ServerMetrics{Requests: sub(m.Requests, old.Requests), Codes: subS(m.Codes, old.Codes), ResponseBytes: sub(m.ResponseBytes, old.ResponseBytes),
		WatchEventBytes: subS(m.WatchEventBytes, old.WatchEventBytes), WatchEvents: subS(m.WatchEvents, old.WatchEvents),
		LongRunning: m.LongRunning, Watchers: m.Watchers}
}

// Writes sums the write requests (IsWrite) whose resource matches (nil: all).
func (m ServerMetrics) Writes(match func(resource string) bool) float64 {
	var n float64
	for k, v := range m.Requests {
		if IsWrite(k.Verb) && (match == nil || match(k.Resource)) {
			n += v
		}
	}
	return n
}

// OpenWatches sums apiserver_longrunning_requests of verb WATCH.
func (m ServerMetrics) OpenWatches() float64 {
	var n float64
	for k, v := range m.LongRunning {
		if k.Verb == VerbWatch {
			n += v
		}
	}
	return n
}

// ReadServerMetrics reads /metrics through cfg (an identity allowed to).
func ReadServerMetrics(ctx context.Context, cfg *rest.Config) (ServerMetrics, error) {
	c := rest.CopyConfig(cfg)
	c.WrapTransport = nil
	c.Timeout = 60 * time.Second
	rc, err := rest.UnversionedRESTClientFor(withCodec(c))
	if err != nil {
		return ServerMetrics{}, err
	}
	raw, err := rc.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return ServerMetrics{}, fmt.Errorf("read the API server's /metrics: %w", err)
	}
	return ParseServerMetrics(raw), nil
}

// PerNodeMinute is n events across nodes over d, per node and minute.
func PerNodeMinute(n float64, nodes int, d time.Duration) float64 {
	if nodes <= 0 || d <= 0 {
		return 0
	}
	return n / float64(nodes) / d.Minutes()
}

func withCodec(c *rest.Config) *rest.Config {
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return c
}
