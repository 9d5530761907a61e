// Package confkeys tells which top-level keys of a CNI plugin config a
// plugin does not read, with a hint at the key that was probably meant
// (`vlan_id` → `vlan`). A misspelled key is otherwise a silent
// misconfiguration: Go's JSON decoding, like the upstream plugins', drops
// it. Keys are matched case-insensitively, as encoding/json matches them, so
// every spelling the upstream plugin accepts is accepted here too.
//
// It is pure (no I/O) and shared by the plugins (a warning in the CNI log)
// and `kubectl rdma lint` (a finding per key).
package confkeys

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// CommonKeys are the keys of every CNI plugin config: the spec's network
// config fields (types.NetConf), what runtimes inject (runtimeConfig,
// prevResult, the GC attachments) and the conventional "args".
var CommonKeys = []string{"cniVersion", "name", "type", "capabilities", "ipam", "dns", "prevResult",
	"runtimeConfig", "args", "cni.dev/valid-attachments", "cni.dev/attachments"}

// Catalogue is what one plugin reads.
type Catalogue struct {
	Plugin string
	// Known are the keys the plugin reads (CommonKeys are added).
	Known []string
	// Ignored are keys an upstream plugin of the same type reads and this
	// one accepts without using: key -> why (warned, with the reason).
	Ignored map[string]string
	// Silent are keys accepted without effect and without a warning (an
	// upstream plugin's own cache fields that can appear in its configs).
	Silent []string
	// Hints map other spellings (other projects' names, common mistakes)
	// to the key meant.
	Hints map[string]string
}

// Finding is one key the plugin does not read.
type Finding struct {
	Plugin string `json:"plugin"`
	Key    string `json:"key"`
	// Hint is the known key it probably means; "" when none is close.
	Hint string `json:"hint,omitempty"`
	// Ignored is set for an upstream key this plugin accepts without using
	// (the reason); the key is then spelled right.
	Ignored string `json:"ignored,omitempty"`
}

func (f Finding) String() string {
	if f.Ignored != "" {
		return fmt.Sprintf("%s config: key %q is accepted but has no effect: %s", f.Plugin, f.Key, f.Ignored)
	}
	s := fmt.Sprintf("%s config: unknown key %q is ignored", f.Plugin, f.Key)
	if f.Hint != "" {
		s += fmt.Sprintf(" (did you mean %q?)", f.Hint)
	}
	return s
}

// Keys returns the top-level keys of a JSON object, sorted.
func Keys(stdin []byte) ([]string, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(stdin, &m); err != nil {
		return nil, fmt.Errorf("config keys: %w", err)
	}
	return slices.Sorted(maps.Keys(m)), nil
}

// Check returns a Finding per key of keys the plugin does not read, in
// the order of keys.
func (c Catalogue) Check(keys []string) []Finding {
	known := map[string]string{} // lower case -> canonical
	for _, k := range append(append([]string(nil), CommonKeys...), c.Known...) {
		known[strings.ToLower(k)] = k
	}
	silent := map[string]bool{}
	for _, k := range c.Silent {
		silent[strings.ToLower(k)] = true
	}
	ignored := map[string]string{}
	for k, why := range c.Ignored {
		ignored[strings.ToLower(k)] = why
	}
	hints := map[string]string{}
	for k, v := range c.Hints {
		hints[strings.ToLower(k)] = v
	}
	var out []Finding
	for _, k := range keys {
		lk := strings.ToLower(k)
		if _, ok := known[lk]; ok || silent[lk] {
			continue
		}
		if why, ok := ignored[lk]; ok {
			out = append(out, Finding{Plugin: c.Plugin, Key: k, Ignored: why})
			continue
		}
		out = append(out, Finding{Plugin: c.Plugin, Key: k, Hint: c.hint(lk, hints, known)})
	}
	return out
}

// CheckJSON is Check over the top-level keys of stdin.
func (c Catalogue) CheckJSON(stdin []byte) ([]Finding, error) {
	keys, err := Keys(stdin)
	if err != nil {
		return nil, err
	}
	return c.Check(keys), nil
}

// hint finds the known key lk (lower case) most probably means: an explicit
// hint, the same key without case, '_', '-' and '.', or the closest known
// key within a small edit distance.
func (c Catalogue) hint(lk string, hints, known map[string]string) string {
	if h, ok := hints[lk]; ok {
		return h
	}
	nk := normalize(lk)
	best, bestD := "", 0
	for _, lower := range slices.Sorted(maps.Keys(known)) {
		canon := known[lower]
		d := distance(nk, normalize(lower))
		if d == 0 {
			return canon
		}
		// at most 2 edits, and fewer than a third of the key: "vlanid" ->
		// "vlan", "spofchk" -> "spoofchk", but "foo" is not "dns"
		if d <= 2 && d*3 <= len(nk) && (best == "" || d < bestD) {
			best, bestD = canon, d
		}
	}
	return best
}

func normalize(s string) string {
	return strings.NewReplacer("_", "", "-", "", ".", "", "/", "").Replace(strings.ToLower(s))
}

// distance is the optimal-string-alignment distance of a and b: edits
// and swaps of two neighbouring letters ("trsut" is one from "trust").
func distance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
