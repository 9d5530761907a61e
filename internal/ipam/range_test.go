package ipam

import (
	"net/netip"
	"testing"
)

func mustRange(t testing.TB, ipam string) *Range {
	t.Helper()
	cfg, err := Parse([]byte(`{"cniVersion":"1.0.0","name":"t","ipam":`+ipam+`}`), Env{})
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Ranges[0]
}

func TestNextUsable(t *testing.T) {
	r := mustRange(t, `{"range":"10.0.0.0/24","exclude":["10.0.0.0/28","10.0.0.16","10.0.0.20/30"],"gateway":"10.0.0.17","range_end":"10.0.0.30"}`)
	tests := []struct {
		name string
		from string
		want string // "" = none
	}{
		{name: "below range jumps over excludes", from: "10.0.0.0", want: "10.0.0.18"},
		{name: "gateway is skipped", from: "10.0.0.17", want: "10.0.0.18"},
		{name: "usable stays", from: "10.0.0.19", want: "10.0.0.19"},
		{name: "exclude /30 skipped", from: "10.0.0.20", want: "10.0.0.24"},
		{name: "range_end bounds", from: "10.0.0.31", want: ""},
		{name: "other family", from: "fd00::1", want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := r.NextUsable(netip.MustParseAddr(tc.from))
			if tc.want == "" {
				if ok {
					t.Fatalf("got %s, want none", got)
				}
				return
			}
			if !ok || got.String() != tc.want {
				t.Fatalf("got %s (%v), want %s", got, ok, tc.want)
			}
		})
	}
	if got := r.Size().Int64(); got != 9 { // .18, .19, .24-.30
		t.Errorf("Size = %d, want 9", got)
	}
}

func TestSizeMatchesEnumeration(t *testing.T) {
	tests := []struct {
		name string
		ipam string
	}{
		{name: "plain /24", ipam: `{"range":"10.0.0.0/24"}`},
		{name: "/31 has no network/broadcast", ipam: `{"range":"10.0.0.0/31"}`},
		{name: "/32", ipam: `{"range":"10.0.0.7/32"}`},
		{name: "excludes and gateway", ipam: `{"range":"10.0.0.0/23","exclude":["10.0.0.0/25","10.0.1.0/24","10.0.0.200/29"],"gateway":"10.0.0.130"}`},
		{name: "nested excludes", ipam: `{"range":"10.0.0.0/24","exclude":["10.0.0.0/26","10.0.0.8/29"]}`},
		{name: "ipv6 small", ipam: `{"range":"fd00::/120","exclude":["fd00::80/121"],"gateway":"fd00::1"}`},
		{name: "start-end", ipam: `{"range":"10.0.0.50-10.0.0.60/24","exclude":["10.0.0.55"]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRange(t, tc.ipam)
			n := int64(0)
			for a, ok := r.NextUsable(r.Prefix.Addr()); ok; a, ok = r.NextUsable(a.Next()) {
				if !r.Prefix.Contains(a) || !r.Usable(a) {
					t.Fatalf("NextUsable returned %s which is not usable", a)
				}
				n++
				if !a.Next().IsValid() {
					break
				}
			}
			if r.Size().Int64() != n {
				t.Fatalf("Size = %s, enumeration found %d", r.Size(), n)
			}
		})
	}
}

func TestNextFreeBlock(t *testing.T) {
	r := mustRange(t, `{"range":"10.0.0.0/24","exclude":["10.0.0.64/26"],"node_slice_size":"/26"}`)
	p := netip.MustParsePrefix
	tests := []struct {
		name  string
		taken []netip.Prefix
		start string
		want  string
	}{
		{name: "first block", want: "10.0.0.0/26"},
		{name: "skip taken and fully excluded", taken: []netip.Prefix{p("10.0.0.0/26")}, want: "10.0.0.128/26"},
		{name: "start in the middle", start: "10.0.0.200", want: "10.0.0.192/26"},
		{name: "wrap around", taken: []netip.Prefix{p("10.0.0.192/26")}, start: "10.0.0.200", want: "10.0.0.0/26"},
		{name: "bigger foreign block covers several", taken: []netip.Prefix{p("10.0.0.0/25")}, want: "10.0.0.128/26"},
		{name: "all taken", taken: []netip.Prefix{p("10.0.0.0/26"), p("10.0.0.128/25")}, want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var start netip.Addr
			if tc.start != "" {
				start = netip.MustParseAddr(tc.start)
			}
			got, ok := r.nextFreeBlock(tc.taken, start)
			if tc.want == "" {
				if ok {
					t.Fatalf("got %s, want none", got)
				}
				return
			}
			if !ok || got.String() != tc.want {
				t.Fatalf("got %s (%v), want %s", got, ok, tc.want)
			}
		})
	}
}

// TestLargeIPv6RangeUsableInFull: a /64 is usable end to end (but for its
// first and last address, as in Whereabouts), blocks near the top are
// claimable, and spreading covers the whole range.
func TestLargeIPv6RangeUsableInFull(t *testing.T) {
	r := mustRange(t, `{"range":"fd00:60::/64","exclude":["fd00:60::/65"],"node_slice_size":"/122"}`)
	if got, want := r.Size().String(), "9223372036854775807"; got != want {
		t.Fatalf("Size = %s, want %s (upper half of a /64 without its last address)", got, want)
	}
	if top := netip.MustParseAddr("fd00:60::ffff:ffff:ffff:ffff"); r.Usable(top) {
		t.Fatalf("the CIDR's last address %s is usable; Whereabouts never hands it out", top)
	}
	last := netip.MustParseAddr("fd00:60::ffff:ffff:ffff:fffe")
	if !r.Usable(last) {
		t.Fatalf("last address %s not usable", last)
	}
	b, ok := r.nextFreeBlock(nil, last)
	if !ok || b.String() != "fd00:60::ffff:ffff:ffff:ffc0/122" {
		t.Fatalf("block at the top: %s %v", b, ok)
	}
	b, ok = r.nextFreeBlock([]netip.Prefix{b}, last)
	if !ok || b.String() != "fd00:60:0:0:8000::/122" {
		t.Fatalf("wrapped block: %s %v", b, ok)
	}
	s := r.spreadStart(^uint64(0))
	if !r.Prefix.Contains(s) || s.Less(r.First) {
		t.Fatalf("spreadStart out of range: %s", s)
	}
}
