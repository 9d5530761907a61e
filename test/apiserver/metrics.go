package apiserver

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"
)

var metricLabelRe = regexp.MustCompile(`(\w+)="([^"]*)"`)

// Requests reads the API server's apiserver_request_total through cfg,
// by "VERB resource[/subresource] code", less the reads of /metrics.
func Requests(ctx context.Context, cfg *rest.Config) (map[string]float64, error) {
	c, err := rest.UnversionedRESTClientFor(withCodec(rest.CopyConfig(cfg)))
	if err != nil {
		return nil, err
	}
	raw, err := c.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("read API server metrics: %w", err)
	}
	return ParseRequests(raw), nil
}

// ParseRequests is apiserver_request_total of a /metrics page by
// "VERB resource[/subresource] code", less the reads of /metrics.
func ParseRequests(raw []byte) map[string]float64 {
	kinds := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") || strings.Contains(line, `subresource="/metrics"`) {
			continue
		}
		i := strings.LastIndex(line, " ")
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		l := map[string]string{}
		for _, m := range metricLabelRe.FindAllStringSubmatch(line[:i], -1) {
			l[m[1]] = m[2]
		}
		k := l["resource"]
		if l["subresource"] != "" {
			k += "/" + l["subresource"]
		}
		kinds[l["verb"]+" "+k+" "+l["code"]] += v
	}
	return kinds
}

// Total sums a Requests map.
func Total(k map[string]float64) int64 {
	var total float64
	for _, v := range k {
		total += v
	}
	return int64(total)
}
