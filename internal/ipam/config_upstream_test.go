package ipam

import (
	"fmt"
	"strings"
	"testing"
)

// TestParseAcceptsWhatWhereaboutsAccepts (issue 27): configs Whereabouts'
// loader accepts and that work there are accepted, read as Whereabouts
// reads them, with a warning naming the field, the value and how it is read
// where the config is odd. test/upstreamipam runs Whereabouts' own loader
// next to Parse over upstream's examples; these are the unit-level cases.
func TestParseAcceptsWhatWhereaboutsAccepts(t *testing.T) {
	tests := []struct {
		name string
		ipam string
		node string
		// want is "first-last gw=<range gateway> ex=<excludes>" of each range, joined by "; ".
		want string
		// wantGateway is Config.Gateway ("" for none).
		wantGateway string
		// wantWarn: one fragment per expected warning, in order.
		wantWarn []string
	}{
		{name: "IPv6 gateway outside its /116 (README)", ipam: `{"range":"2001::0/116","gateway":"2001::f:1"}`,
			want: "2001::1-2001::ffe gw=invalid IP ex=[]", wantGateway: "2001::f:1",
			wantWarn: []string{`field "gateway" = "2001::f:1": outside every range (2001::/116)`}},
		{name: "IPv4 gateway outside, IPv6 route without gw", ipam: `{"range":"2001::1/116","gateway":"192.168.10.1","routes":[{"dst":"::/0"}]}`,
			want: "2001::1-2001::ffe gw=invalid IP ex=[]", wantGateway: "192.168.10.1",
			wantWarn: []string{`outside every range (2001::/116)`}},
		{name: "leading zeroes in range and bounds", ipam: `{"range":"00192.00168.1.0/24","range_start":"00192.00168.1.44","range_end":"00192.00168.01.209"}`,
			want:     "192.168.1.44-192.168.1.209 gw=invalid IP ex=[]",
			wantWarn: []string{`field "range" = "00192.00168.1.0/24": IPv4 with leading zeroes`, `field "range_start" = "00192.00168.1.44": IPv4 with leading zeroes, read as decimal as Whereabouts reads it; other tools (inet_aton, ping) read 010 as octal 8; write 192.168.1.44`, `"range_end"`}},
		{name: "leading zeroes in start-end", ipam: `{"range":"00192.00168.1.5-000000192.168.1.25/24"}`,
			want: "192.168.1.5-192.168.1.25 gw=invalid IP ex=[]", wantWarn: []string{`field "range" = "00192.00168.1.5-000000192.168.1.25/24": IPv4 with leading zeroes`}},
		{name: "range_start outside the range is ignored", ipam: `{"range":"10.0.0.0/24","range_start":"10.0.1.9"}`,
			want: "10.0.0.1-10.0.0.254 gw=invalid IP ex=[]", wantWarn: []string{`field "range_start" = "10.0.1.9": range_start is not a usable address of 10.0.0.0/24 (10.0.0.1-10.0.0.254): ignored, as Whereabouts ignores it`}},
		{name: "range_end before range_start is ignored", ipam: `{"range":"10.0.0.0/24","range_start":"10.0.0.9","range_end":"10.0.0.3"}`,
			want: "10.0.0.9-10.0.0.254 gw=invalid IP ex=[]", wantWarn: []string{`field "range_end" = "10.0.0.3": range_end is not a usable address of 10.0.0.0/24 at or after the start (10.0.0.9-10.0.0.254): ignored`}},
		{name: "range_start garbage is ignored", ipam: `{"range":"10.0.0.0/24","range_start":"ten"}`,
			want: "10.0.0.1-10.0.0.254 gw=invalid IP ex=[]", wantWarn: []string{`field "range_start" = "ten": not an IP address: ignored, as Whereabouts ignores it`}},
		{name: "start-end wins over range_start", ipam: `{"range":"10.0.0.5-10.0.0.9/24","range_start":"10.0.0.6"}`,
			want: "10.0.0.5-10.0.0.9 gw=invalid IP ex=[]", wantWarn: []string{`field "range_start" = "10.0.0.6": ignored: the start-end written in range "10.0.0.5-10.0.0.9/24" wins`}},
		{name: "network address as start is no bound", ipam: `{"range":"2001:db8:5422:0005::-2001:db8:5422:0005:7fff:ffff:ffff:ffff/64"}`,
			want: "2001:db8:5422:5::1-2001:db8:5422:5:7fff:ffff:ffff:ffff gw=invalid IP ex=[]"},
		{name: "host bits are not the start", ipam: `{"range":"192.168.2.230/24"}`,
			want: "192.168.2.1-192.168.2.254 gw=invalid IP ex=[]", wantWarn: []string{`field "range" = "192.168.2.230/24": the address part 192.168.2.230 is not where allocation starts: Whereabouts reads the range as 192.168.2.0/24 and starts at its first usable address; to start at 192.168.2.230, set "range_start" or write "192.168.2.230-192.168.2.254/24"`}},
		{name: "host bits at the first address say nothing", ipam: `{"range":"192.168.10.1/24"}`, want: "192.168.10.1-192.168.10.254 gw=invalid IP ex=[]"},
		{name: "exclude of the other family", ipam: `{"range":"10.60.0.0/24","exclude":["fd00::/64","10.60.0.0/28"]}`,
			want: "10.60.0.1-10.60.0.254 gw=invalid IP ex=[10.60.0.0/28]", wantWarn: []string{`field "exclude[0]" = "fd00::/64": address family differs`}},
		{name: "etcd datastore", ipam: `{"range":"10.0.0.0/24","datastore":"etcd","etcd_host":"h:2379"}`,
			want: "10.0.0.1-10.0.0.254 gw=invalid IP ex=[]", wantWarn: []string{`field "datastore" = "etcd": ignored in the network config`}},
		{name: "slice bigger than a block", ipam: `{"range":"10.0.0.0/8","node_slice_size":"/10"}`,
			want: "10.0.0.1-10.255.255.254 gw=invalid IP ex=[]", wantWarn: []string{`field "node_slice_size" = "/10": a node's block holds at most 4096 addresses: nodes claim /20 blocks`}},
		{name: "historic ranges alone", ipam: `{"ranges":[{"range":"10.0.0.0/24","range_start":"10.0.0.10"}]}`,
			want: "10.0.0.10-10.0.0.254 gw=invalid IP ex=[]", wantWarn: []string{`field "ranges": read as "ipRanges"`}},
		{name: "historic ranges next to range", ipam: `{"range":"10.0.0.0/24","ranges":[{"range":"10.1.0.0/24"}]}`,
			want: "10.0.0.1-10.0.0.254 gw=invalid IP ex=[]", wantWarn: []string{`field "ranges": ignored, as Whereabouts ignores it`}},
		{name: "top-level bounds without range", ipam: `{"range_start":"10.0.0.5","ipRanges":[{"range":"10.0.0.0/24"}]}`,
			want: "10.0.0.1-10.0.0.254 gw=invalid IP ex=[]", wantWarn: []string{`field "range_start" = "10.0.0.5": ignored: there is no top-level "range"`}},
		{name: "range and gateway from the node file", ipam: `{"type":"whereabouts"}`, node: `{"range":"10.0.0.0/24","gateway":"10.0.0.1"}`,
			want: "10.0.0.1-10.0.0.254 gw=10.0.0.1 ex=[]", wantGateway: "10.0.0.1"},
		{name: "network config gateway beats the node file", ipam: `{"range":"10.0.0.0/24","gateway":"10.0.0.2"}`, node: `{"gateway":"10.0.0.1"}`,
			want: "10.0.0.1-10.0.0.254 gw=10.0.0.2 ex=[]", wantGateway: "10.0.0.2"},
		{name: "node file enable_overlapping_ranges is ignored", ipam: `{"range":"10.0.0.0/24"}`, node: `{"enable_overlapping_ranges":false}`,
			want: "10.0.0.1-10.0.0.254 gw=invalid IP ex=[]", wantWarn: []string{`field "enable_overlapping_ranges" = "false": set in the node config file`}},
		{name: "IPv4 /32 is served whole", ipam: `{"range":"10.0.0.7/32"}`, want: "10.0.0.7-10.0.0.7 gw=invalid IP ex=[]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(`{"cniVersion":"1.0.0","name":"train","ipam":`+tc.ipam+`}`), Env{NodeConfig: []byte(tc.node)})
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var got []string
			for _, r := range cfg.Ranges {
				got = append(got, fmt.Sprintf("%s-%s gw=%v ex=%v", r.First, r.Last, r.Gateway, r.Exclude))
			}
			if g := strings.Join(got, "; "); g != tc.want {
				t.Errorf("ranges %s, want %s", g, tc.want)
			}
			if g := cfg.Gateway; (tc.wantGateway == "" && g.IsValid()) || (tc.wantGateway != "" && g.String() != tc.wantGateway) {
				t.Errorf("gateway %v, want %q", g, tc.wantGateway)
			}
			if len(cfg.Warnings) != len(tc.wantWarn) {
				t.Fatalf("warnings %q, want %d: %q", cfg.Warnings, len(tc.wantWarn), tc.wantWarn)
			}
			for i, w := range tc.wantWarn {
				if !strings.Contains(cfg.Warnings[i], w) || !strings.HasPrefix(cfg.Warnings[i], `rdmanet-ipam: network "train (network_name unset: pool \"default\")": field "`) {
					t.Errorf("warning %q lacks %q or the network and field", cfg.Warnings[i], w)
				}
			}
		})
	}
}

// TestParseAddrSloppy: the old Go parser's grammar that Whereabouts uses.
func TestParseAddrSloppy(t *testing.T) {
	tests := []struct {
		name, in, want string
		lz             bool
	}{
		{name: "plain", in: "10.0.0.1", want: "10.0.0.1"},
		{name: "leading zeroes", in: "00192.00168.01.209", want: "192.168.1.209", lz: true},
		{name: "zero octet", in: "10.0.0.0", want: "10.0.0.0"},
		{name: "octet too big", in: "10.0.0.256"},
		{name: "three octets", in: "10.0.1"},
		{name: "empty octet", in: "10..0.1"},
		{name: "ipv6", in: "2001:db8::1", want: "2001:db8::1"},
		{name: "ipv6 leading zeroes in groups", in: "2001:db8:480:603d:0304:0403:000:0000", want: "2001:db8:480:603d:304:403::"},
		{name: "ipv6 long group", in: "2001:db8::00001", want: "2001:db8::1"},
		{name: "ipv6 zone", in: "fe80::1%eth0"},
		{name: "mapped ipv4 with leading zeroes", in: "::ffff:010.0.0.1", want: "10.0.0.1", lz: true},
		{name: "no dot or colon", in: "10"},
		{name: "space", in: " 10.0.0.1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, lz, err := parseAddrSloppy(tc.in)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("parsed %q as %s, want an error", tc.in, a)
				}
				return
			}
			if err != nil || a.String() != tc.want || lz != tc.lz {
				t.Fatalf("got %s lz=%t err=%v, want %s lz=%t", a, lz, err, tc.want, tc.lz)
			}
		})
	}
	for _, s := range []string{"10.0.0.0/024", "10.0.0.0/24"} {
		if _, p, _, err := parsePrefixSloppy(s); err != nil || p.String() != "10.0.0.0/24" {
			t.Errorf("%s: %v %v", s, p, err)
		}
	}
	for _, s := range []string{"10.0.0.0/33", "10.0.0.0/", "10.0.0.0", "10.0.0.0/2x"} {
		if _, p, _, err := parsePrefixSloppy(s); err == nil {
			t.Errorf("%s parsed as %v, want an error", s, p)
		}
	}
}
