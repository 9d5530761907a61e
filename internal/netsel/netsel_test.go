package netsel

import (
	"errors"
	"strings"
	"testing"
)

func TestParseShortAsMultus(t *testing.T) {
	tests := []struct {
		name    string
		element string
		want    Short
		err     string // substring; "" = accepted
	}{
		{name: "name", element: "sriov-rdma", want: Short{Name: "sriov-rdma"}},
		{name: "namespace, name, interface", element: "training/sriov-rdma@net1", want: Short{Namespace: "training", Name: "sriov-rdma", Interface: "net1"}},
		{name: "spaces trimmed around each part", element: " training / sriov-rdma @ net1 ", want: Short{Namespace: "training", Name: "sriov-rdma", Interface: "net1"}},
		{name: "empty interface is no interface", element: "a@", want: Short{Name: "a"}},
		{name: "empty namespace is the pod's", element: "/a", want: Short{Name: "a"}},
		{name: "empty name is left to the caller", element: "@net1", want: Short{Interface: "net1"}},
		{name: "interface of 15 bytes", element: "a@abcdefghijklmno", want: Short{Name: "a", Interface: "abcdefghijklmno"}},
		{name: "':' in an interface passes Multus", element: "a@x:y", want: Short{Name: "a", Interface: "x:y"}},
		{name: "two @", element: "a@b@c", err: "failed at '@'"},
		{name: "two /", element: "a/b/c", err: "failed at '/'"},
		{name: "namespace with '_'", element: "Bad_NS/a", err: `namespace "Bad_NS"`},
		{name: "dotted name", element: "a.b", err: `name "a.b"`},
		{name: "name ending in '-'", element: "a-", err: `name "a-"`},
		{name: "interface of 16 bytes", element: "a@abcdefghijklmnop", err: "at most 15 bytes"},
		{name: "a / after @ splits first, as in Multus", element: "a@x/y", err: `namespace "a@x"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseShort(tc.element)
			if tc.err != "" {
				var se *SyntaxError
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &se) {
					t.Fatalf("err = %v, want a SyntaxError with %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestIsJSONAsMultus(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value string
		want  bool
	}{
		{"list", `[{"name":"a"}]`, true},
		{"object", `{"name":"a"}`, true},
		{"quote anywhere", `a@"b"`, true},
		{"short form", "ns/a@net1,b", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsJSON(tc.value); got != tc.want {
				t.Fatalf("IsJSON(%q) = %v", tc.value, got)
			}
		})
	}
}
