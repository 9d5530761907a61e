package ipam

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// knownKeys lists every key the "ipam" object (and the node config file) may
// carry: Whereabouts' fields, whether rdmanet-ipam uses them or not, and
// rdmanet's own. Nested objects list their keys under "<key>." entries.
var knownKeys = map[string][]string{
	"": {
		// Whereabouts fields rdmanet-ipam implements.
		"type", "range", "range_start", "range_end", "exclude", "ipRanges", "gateway", "network_name",
		"routes", "dns", "node_slice_size", "enable_overlapping_ranges", "datastore", "kubernetes",
		"configuration_path", "log_file", "log_level",
		// Whereabouts fields that tune Whereabouts' own machinery: accepted, no effect.
		"name", "addresses", "leader_lease_duration", "leader_renew_deadline", "leader_retry_period",
		"reconciler_cron_expression", "sleep_for_race", "lease_duration", "backoff",
		"etcd_host", "etcd_username", "etcd_password", "etcd_key_file", "etcd_cert_file", "etcd_ca_cert_file",
		// rdmanet-ipam fields.
		"store", "node_name", "kubeconfig",
	},
	"ipRanges[]": {"range", "range_start", "range_end", "exclude"},
	"kubernetes": {"kubeconfig", "k8s_api_root"},
	"store":      {"type", "path", "kubeconfig"},
}

// historicKeys maps keys that are not Whereabouts keys but are written for
// one to the key they stand for: "ranges", an early name of ipRanges that
// Whereabouts never released (and host-local's key), is closer to "range"
// by spelling but means ipRanges.
var historicKeys = map[string]map[string]string{
	"": {"ranges": "ipRanges"},
}

// UnknownKey is a key of an ipam config that neither rdmanet-ipam nor
// Whereabouts knows: a typo, most likely, whose setting is silently lost.
type UnknownKey struct {
	// Path is the key's place, e.g. "rangeStart" or "ipRanges[1].rangeEnd".
	Path string
	Key  string
	// Suggestion is the known key it most likely means ("" when none is close).
	Suggestion string
}

func (u UnknownKey) String() string {
	if u.Suggestion != "" {
		return fmt.Sprintf("unknown key %q (ignored; did you mean %q?)", u.Path, u.Suggestion)
	}
	return fmt.Sprintf("unknown key %q (ignored)", u.Path)
}

// UnknownKeys returns the unknown keys of a decoded ipam object (and of its
// ipRanges entries, kubernetes and store objects), sorted by path. Keys are
// matched case-insensitively, as encoding/json (and so Whereabouts) reads them.
func UnknownKeys(ipam map[string]any) []UnknownKey {
	var out []UnknownKey
	check := func(obj map[string]any, level, prefix string) {
		for k := range obj {
			if known(level, k) {
				continue
			}
			out = append(out, UnknownKey{Path: prefix + k, Key: k, Suggestion: suggest(level, k)})
		}
	}
	check(ipam, "", "")
	for k, v := range ipam {
		switch strings.ToLower(k) {
		case "ipranges":
			list, _ := v.([]any)
			for i, e := range list {
				if m, ok := e.(map[string]any); ok {
					check(m, "ipRanges[]", fmt.Sprintf("%s[%d].", k, i))
				}
			}
		case "kubernetes", "store":
			if m, ok := v.(map[string]any); ok {
				check(m, strings.ToLower(k), k+".")
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func known(level, key string) bool {
	return slices.ContainsFunc(knownKeys[level], func(k string) bool { return strings.EqualFold(k, key) })
}

// suggest returns the known key of level that key most likely misspells:
// the same letters without case and separators (rangeStart → range_start),
// else the nearest by edit distance, if it is close.
func suggest(level, key string) string {
	norm := func(s string) string {
		return strings.NewReplacer("_", "", "-", "", ".", "").Replace(strings.ToLower(s))
	}
	if k, ok := historicKeys[level][strings.ToLower(key)]; ok {
		return k
	}
	best, bestDist := "", 0
	for _, k := range knownKeys[level] {
		if norm(k) == norm(key) {
			return k
		}
		d := editDistance(norm(k), norm(key))
		if best == "" || d < bestDist {
			best, bestDist = k, d
		}
	}
	if best != "" && bestDist <= max(1, len(norm(key))/4) {
		return best
	}
	return ""
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
