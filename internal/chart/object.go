package chart

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Object is one Kubernetes object of a rendered installation.
type Object struct {
	// Source is where it came from: a file under deploy/ or a chart
	// template ("templates/node-daemonset.yaml", "crds/...").
	Source string
	*unstructured.Unstructured
}

// Key identifies an object in an installation: group/kind namespace/name.
func (o Object) Key() string {
	gvk := o.GroupVersionKind()
	g := gvk.Group
	if g == "" {
		g = "core"
	}
	ns := o.GetNamespace()
	if ns != "" {
		ns += "/"
	}
	return g + "/" + gvk.Kind + " " + ns + o.GetName()
}

func (o Object) String() string { return o.Source + ": " + o.Key() }

// decodeObjects decodes the YAML (or JSON) documents of data, skipping
// empty ones, each tagged with source.
func decodeObjects(source string, data []byte) ([]Object, error) {
	var out []Object
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("%s: a document without apiVersion, kind or metadata.name: %v", source, m)
		}
		out = append(out, Object{Source: source, Unstructured: u})
	}
}

// Diff compares two installations object by object and returns one
// message per difference: an object only in one of them, or an object whose
// content differs (with the fields that differ). ConfigMap data values
// that are JSON on both sides are compared as JSON (a chart writes the pool
// config from values, so its spacing may differ). want and got name the
// two sides in the messages ("deploy/", "chart").
func Diff(wantName string, want []Object, gotName string, got []Object) []string {
	index := func(objs []Object) (map[string]Object, []string) {
		m := map[string]Object{}
		var dup []string
		for _, o := range objs {
			if prev, ok := m[o.Key()]; ok {
				dup = append(dup, fmt.Sprintf("%s twice: %s and %s", o.Key(), prev.Source, o.Source))
			}
			m[o.Key()] = o
		}
		return m, dup
	}
	w, dupW := index(want)
	g, dupG := index(got)
	var out []string
	for _, d := range dupW {
		out = append(out, wantName+": "+d)
	}
	for _, d := range dupG {
		out = append(out, gotName+": "+d)
	}
	var keys []string
	for k := range w {
		keys = append(keys, k)
	}
	for k := range g {
		if _, ok := w[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		wo, inW := w[k]
		goo, inG := g[k]
		switch {
		case !inG:
			out = append(out, fmt.Sprintf("%s (%s) is missing from %s", k, wo.Source, gotName))
		case !inW:
			out = append(out, fmt.Sprintf("%s (%s) is in %s only, not in %s", k, goo.Source, gotName, wantName))
		default:
			var fields []string
			diffValue("", normalize(wo), normalize(goo), &fields)
			if len(fields) > 0 {
				out = append(out, fmt.Sprintf("%s differs between %s (%s) and %s (%s):\n  %s",
					k, wantName, wo.Source, gotName, goo.Source, strings.Join(fields, "\n  ")))
			}
		}
	}
	return out
}

// normalize is an object's content as plain JSON values, with ConfigMap
// data that parses as JSON replaced by its parsed form.
func normalize(o Object) any {
	b, err := json.Marshal(o.Object)
	if err != nil {
		return o.Object
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		return o.Object
	}
	if o.GetKind() == "ConfigMap" && o.GetAPIVersion() == "v1" {
		if data, ok := v["data"].(map[string]any); ok {
			for k, s := range data {
				str, ok := s.(string)
				if !ok {
					continue
				}
				var parsed any
				if json.Unmarshal([]byte(str), &parsed) == nil {
					data[k] = map[string]any{"(json)": parsed}
				}
			}
		}
	}
	return v
}

// diffValue appends "path: want X, got Y" for each difference of a and b.
func diffValue(path string, a, b any, out *[]string) {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := map[string]bool{}
		for k := range av {
			keys[k] = true
		}
		for k := range bv {
			keys[k] = true
		}
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range keys {
				if !yield(k) {
					return
				}
			}
		}) {
			x, inA := av[k]
			y, inB := bv[k]
			p := path + "." + k
			switch {
			case !inA:
				*out = append(*out, fmt.Sprintf("%s: only in the second: %s", p, short(y)))
			case !inB:
				*out = append(*out, fmt.Sprintf("%s: missing from the second (first has %s)", p, short(x)))
			default:
				diffValue(p, x, y, out)
			}
		}
		return
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			break
		}
		for i := range av {
			diffValue(fmt.Sprintf("%s[%d]", path, i), av[i], bv[i], out)
		}
		return
	}
	if short(a) != short(b) {
		*out = append(*out, fmt.Sprintf("%s: first %s, second %s", path, short(a), short(b)))
	}
}

func short(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}
