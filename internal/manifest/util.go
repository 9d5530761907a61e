package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

func jsonUnmarshal(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	return d.Decode(v)
}

// Get walks a dotted path of map keys in decoded JSON ("spec.template").
func Get(v any, path string) (any, bool) {
	if path == "" {
		return v, true
	}
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		v, ok = m[k]
		if !ok {
			return nil, false
		}
	}
	return v, true
}

// GetString is Get for a string value ("" when absent or not a string).
func GetString(v any, path string) string {
	x, _ := Get(v, path)
	s, _ := x.(string)
	return s
}

// StringList reads a JSON value that should be a list of strings; a single
// string becomes a one-element list.
func StringList(v any) []string {
	switch t := v.(type) {
	case string:
		if t == "" {
			return nil
		}
		return []string{t}
	case []any:
		out := make([]string, 0, len(t))
		for _, it := range t {
			switch s := it.(type) {
			case string:
				out = append(out, s)
			case float64:
				out = append(out, fmt.Sprint(s))
			}
		}
		return out
	}
	return nil
}

// Int reads a JSON number or numeric string.
func Int(v any) (int, bool) {
	switch t := v.(type) {
	case float64:
		return int(t), t == float64(int(t))
	case string:
		var n int
		if _, err := fmt.Sscanf(t, "%d", &n); err == nil && fmt.Sprint(n) == strings.TrimSpace(t) {
			return n, true
		}
	}
	return 0, false
}
