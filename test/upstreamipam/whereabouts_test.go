// Package upstreamipam runs Whereabouts' own config loader (v0.9.2,
// pkg/config.LoadIPAMConfig) next to rdmanet-ipam's parser (ipam.Parse)
// over a corpus of Whereabouts configs: the README's, the docs' and the
// configs of upstream's tests, each rewritten here as the smallest config
// that reproduces the case (issue 27). Both must take the same decision
// (accept or refuse) and, when both accept, read the same effective values:
// per range the CIDR, the first and last address handed out (after
// range_start/range_end, as Whereabouts' allocator bounds them), the
// excludes; the gateway, routes, DNS, network name, overlapping-ranges
// setting, node slice size, kubeconfig and logging. Where rdmanet differs on
// purpose, because Whereabouts' answer fails later anyway, the case says so
// in differs and names what rdmanet's message or warning must say.
package upstreamipam

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	wbconfig "github.com/k8snetworkplumbingwg/whereabouts/pkg/config"
	"github.com/k8snetworkplumbingwg/whereabouts/pkg/iphelpers"
	"github.com/k8snetworkplumbingwg/whereabouts/pkg/logging"
	wbtypes "github.com/k8snetworkplumbingwg/whereabouts/pkg/types"

	"github.com/rdmanet/rdmanet/internal/ipam"
)

// M is a JSON object.
type M = map[string]any

// daemonsetFlatFile is the flat file Whereabouts' daemonset install writes
// (script/lib.sh, generateWhereaboutsConf): it supplies the kubeconfig that
// most upstream examples leave out. rdmanet reads it as its node config.
func daemonsetFlatFile() M {
	return M{
		"datastore":                  "kubernetes",
		"kubernetes":                 M{"kubeconfig": "/etc/cni/net.d/whereabouts.d/whereabouts.kubeconfig"},
		"reconciler_cron_expression": "30 4 * * *",
	}
}

type corpusCase struct {
	name string
	// source is the upstream example or test the case reproduces.
	source string
	// ipam is the "ipam" object (type whereabouts is added).
	ipam M
	// flat is the flat file (the node config); nil is daemonsetFlatFile.
	flat M
	// differs, when set, is why rdmanet deliberately answers otherwise:
	// Whereabouts' answer fails later (at ADD, in its allocator or in the
	// main plugin). The test checks that the answers do differ.
	differs string
	// gap, when set, is a difference the rule does not allow (Whereabouts'
	// answer works), kept open and listed: the test checks that it still
	// differs, so that fixing it removes the entry.
	gap string
	// why is a fragment rdmanet's error (when it refuses) or one of its
	// warnings must contain: the field, the value and the reason.
	why string
}

func whereaboutsCorpus() []corpusCase {
	return []corpusCase{
		// --- README.md (v0.9.2) ---
		{name: "readme basic with excludes", source: "README.md, Example IPAM Config",
			ipam: M{"range": "192.168.2.225/28", "exclude": []any{"192.168.2.229/30", "192.168.2.236/32"}}},
		{name: "readme network attachment definition", source: "README.md, An example configuration using a NetworkAttachmentDefinition",
			ipam: M{"range": "192.168.2.225/28"}},
		{name: "readme ipv6 gateway outside its /116", source: "README.md, Example IPv6 Config",
			ipam: M{"range": "2001::0/116", "gateway": "2001::f:1"}, why: `field "gateway" = "2001::f:1": outside every range (2001::/116)`},
		{name: "readme ipRanges", source: "README.md, Example IPAM config for assigning multiple IP addresses",
			ipam: M{"ipRanges": []any{M{"range": "192.168.10.1/24"}, M{"range": "176.168.10.1/16"}}}},
		{name: "readme ipRanges with range", source: "README.md, ipRanges in combination with range",
			ipam: M{"ipRanges": []any{M{"range": "192.168.10.1/24"}, M{"range": "176.168.10.1/16"}}, "range": "abcd::1/64"}},
		{name: "readme dual stack", source: "README.md, Example DualStack config",
			ipam: M{"ipRanges": []any{M{"range": "192.168.10.1/24"}, M{"range": "abcd::1/64"}}}},
		{name: "readme fast ipam node slices", source: "README.md, Fast IPAM Configuration (slice /22 of a /24)",
			ipam: M{"range": "192.168.2.0/24", "node_slice_size": "/22"}},
		{name: "readme range end syntax", source: "README.md, Range end syntax",
			ipam: M{"range": "192.168.2.225-192.168.2.230/28"}},
		{name: "readme network names", source: "README.md, Network names",
			ipam: M{"range": "192.168.2.225/28", "network_name": "network-with-independent-allocation", "enable_overlapping_ranges": true}},
		{name: "readme overlapping ranges disabled", source: "README.md, Overlapping Ranges (enable_overlapping_ranges false)",
			ipam: M{"range": "192.168.2.225/28", "enable_overlapping_ranges": false}},

		// --- doc/extended-configuration.md, doc/sample_config.json ---
		{name: "docs etcd example", source: "doc/extended-configuration.md, Example etcd datastore configuration",
			ipam: M{"etcd_host": "example-etcd-cluster-client.cluster.local:2379", "range": "192.168.2.225/28",
				"exclude": []any{"192.168.2.229/30", "192.168.2.236/32"}, "log_file": "whereabouts.log", "log_level": "debug", "gateway": "192.168.2.1"}},
		{name: "docs flat file and short nad", source: "doc/extended-configuration.md, Example flat file configuration",
			flat: M{"datastore": "kubernetes", "kubernetes": M{"kubeconfig": "/etc/cni/net.d/whereabouts.d/whereabouts.kubeconfig"}, "log_file": "whereabouts.log", "log_level": "debug"},
			ipam: M{"range": "192.168.2.225/28"}},
		{name: "docs sample config routes and dns", source: "doc/sample_config.json",
			ipam: M{"range": "192.168.1.0/24", "etcd_host": "192.168.122.1",
				"routes": []any{M{"dst": "0.0.0.0/0"}, M{"dst": "192.168.0.0/16", "gw": "10.10.5.1"}, M{"dst": "3ffe:ffff:0:01ff::1/64"}},
				"dns":    M{"nameservers": []any{"8.8.8.8"}, "domain": "example.com", "search": []any{"example.com"}}}},
		{name: "docs etcd datastore key", source: "doc/extended-configuration.md (etcd era): \"datastore\": \"etcd\"",
			ipam: M{"datastore": "etcd", "etcd_host": "example-etcd-cluster-client.cluster.local:2379", "range": "192.168.2.225/28"},
			why:  `field "datastore" = "etcd": ignored in the network config`},

		// --- pkg/config/config_test.go ---
		{name: "config test basic, gateway outside", source: "pkg/config/config_test.go, can load a basic config",
			ipam: M{"log_file": "whereabouts.log", "log_level": "debug", "kubernetes": M{"kubeconfig": "/etc/cni/net.d/whereabouts.d/whereabouts.kubeconfig"},
				"range": "192.168.1.5-192.168.1.25/24", "gateway": "192.168.10.1"},
			why: `field "gateway" = "192.168.10.1": outside every range (192.168.1.0/24)`},
		{name: "config test global flat file", source: "pkg/config/config_test.go, can load a global flat-file config",
			flat: M{"datastore": "kubernetes", "kubernetes": M{"kubeconfig": "/etc/cni/net.d/whereabouts.d/whereabouts.kubeconfig"}, "log_file": "whereabouts.log", "log_level": "debug", "gateway": "192.168.5.5"},
			ipam: M{"range": "192.168.2.230/24", "range_start": "192.168.2.223", "gateway": "192.168.10.1",
				"leader_lease_duration": 3000, "leader_renew_deadline": 2000, "leader_retry_period": 1000}},
		{name: "config test gateway from the flat file", source: "pkg/config/config_test.go, can load a global flat-file config (without the network config's gateway)",
			flat: M{"datastore": "kubernetes", "kubernetes": M{"kubeconfig": "/etc/cni/net.d/whereabouts.d/whereabouts.kubeconfig"}, "gateway": "192.168.2.5"},
			ipam: M{"range": "192.168.2.230/24"}},
		{name: "config test overlapping set, flat file false", source: "pkg/config/config_test.go, overlapping range can be set",
			flat: M{"datastore": "kubernetes", "kubernetes": M{"kubeconfig": "/k"}, "gateway": "192.168.5.5", "enable_overlapping_ranges": false},
			ipam: M{"range": "192.168.2.230/24", "enable_overlapping_ranges": true}},
		{name: "config test overlapping disabled, flat file true", source: "pkg/config/config_test.go, overlapping range can be disabled",
			flat: M{"datastore": "kubernetes", "kubernetes": M{"kubeconfig": "/k"}, "gateway": "192.168.5.5", "enable_overlapping_ranges": true},
			ipam: M{"range": "192.168.2.230/24", "enable_overlapping_ranges": false}},
		{name: "flat file false alone is ignored", source: "pkg/config/config.go: LoadIPAMConfig keeps the network config's enable_overlapping_ranges across the flat-file merge",
			flat: M{"kubernetes": M{"kubeconfig": "/k"}, "enable_overlapping_ranges": false},
			ipam: M{"range": "10.0.0.0/24"}, why: `field "enable_overlapping_ranges" = "false": set in the node config file`},
		{name: "config test leading zeroes start-end", source: "pkg/config/config_test.go, allows for leading zeroes in the range in start/end range format",
			ipam: M{"range": "00192.00168.1.5-000000192.168.1.25/24", "gateway": "192.168.10.1"}, why: "IPv4 with leading zeroes"},
		{name: "config test leading zeroes range", source: "pkg/config/config_test.go, allows for leading zeroes in the range",
			ipam: M{"range": "00192.00168.1.0/24", "gateway": "192.168.10.1"}, why: `field "range" = "00192.00168.1.0/24": IPv4 with leading zeroes`},
		{name: "config test leading zeroes with start", source: "pkg/config/config_test.go, allows for leading zeroes in the range when the start range is provided",
			ipam: M{"range": "00192.00168.1.0/24", "range_start": "00192.00168.1.44", "gateway": "192.168.10.1"}, why: `field "range_start" = "00192.00168.1.44": IPv4 with leading zeroes`},
		{name: "config test leading zeroes with start and end", source: "pkg/config/config_test.go, allows for leading zeroes in the range when the start and end ranges are provided",
			ipam: M{"range": "00192.00168.1.0/24", "range_start": "00192.00168.1.44", "range_end": "00192.00168.01.209", "gateway": "192.168.10.1"}, why: `field "range_end" = "00192.00168.01.209"`},
		{name: "config test cron expression", source: "pkg/config/config_test.go, can unmarshall the cronjob expression",
			ipam: M{"range": "00192.00168.1.0/24", "range_start": "00192.00168.1.44", "range_end": "00192.00168.01.209", "gateway": "192.168.10.1", "reconciler_cron_expression": "30 4 * * *"}},
		{name: "config test invalid range", source: "pkg/config/config_test.go, errors when an invalid range specified",
			ipam: M{"range": "192.168.1.5-192.168.2.25/28", "gateway": "192.168.10.1"}, why: "range start 192.168.1.5 is outside the CIDR 192.168.2.16/28"},

		// --- cmd/whereabouts_test.go ---
		{name: "cmd test ipv4 gateway outside", source: "cmd/whereabouts_test.go, allocates and releases addresses on ADD/DEL (IPv4)",
			ipam: M{"range": "192.168.1.0/24", "gateway": "192.168.10.1"}, why: "outside every range"},
		{name: "cmd test ipv6 gateway outside", source: "cmd/whereabouts_test.go, allocates and releases addresses on ADD/DEL (IPv6)",
			ipam: M{"range": "2001::1/116", "gateway": "2001::f:1"}},
		{name: "cmd test start-end kubernetes backend", source: "cmd/whereabouts_test.go, allocates and releases addresses on ADD/DEL with a Kubernetes backend",
			ipam: M{"range": "192.168.1.11-192.168.1.23/24", "gateway": "192.168.10.1"}},
		{name: "cmd test ipv6 left-hand zeroes", source: "cmd/whereabouts_test.go, allocates and releases an IPv6 address with left-hand zeroes",
			ipam: M{"range": "fd::1/116", "gateway": "fd::f:1"}},
		{name: "cmd test ipv6 range ending in zeroes", source: "cmd/whereabouts_test.go, allocates and releases an IPv6 range that ends with zeroes (first)",
			ipam: M{"range": "2001:db8:480:603d:0304:0403:000:0000-2001:db8:480:603d:0304:0403:0000:0004/64", "gateway": "2001:db8:480:603d::1"}},
		{name: "cmd test ipv6 start at the network address", source: "cmd/whereabouts_test.go, allocates and releases an IPv6 range that ends with zeroes (second)",
			ipam: M{"range": "2001:db8:5422:0005::-2001:db8:5422:0005:7fff:ffff:ffff:ffff/64", "gateway": "2001:db8:5422:0005::1"}},
		{name: "cmd test ipv6 start-end in a /64", source: "cmd/whereabouts_test.go, allocates IPv6 addresses with DNS-1123 conformant naming",
			ipam: M{"range": "fd00:0:0:10:0:0:3:1-fd00:0:0:10:0:0:3:6/64", "gateway": "2001::f:1"}},
		{name: "cmd test excludes with default route via off-link gateway", source: "cmd/whereabouts_test.go, excludes a range of addresses",
			ipam: M{"log_file": "whereabouts.log", "log_level": "debug", "range": "192.168.1.0/24", "exclude": []any{"192.168.1.0/28", "192.168.1.16/28"},
				"gateway": "192.168.10.1", "routes": []any{M{"dst": "0.0.0.0/0"}}},
			differs: "the main plugin adds 0.0.0.0/0 via 192.168.10.1, which is not on net1's subnet 192.168.1.0/24: its ADD fails (network is unreachable); upstream's test stops at the IPAM result",
			why:     `field "gateway" = "192.168.10.1": outside every range (192.168.1.0/24), and routes[0] (dst 0.0.0.0/0) has no "gw"`},
		{name: "cmd test ipv6 excludes, ipv4 route", source: "cmd/whereabouts_test.go, excludes a range of IPv6 addresses",
			ipam: M{"range": "2001::1/116", "exclude": []any{"2001::0/128", "2001::1/128", "2001::2/128"}, "gateway": "2001::f:1", "routes": []any{M{"dst": "0.0.0.0/0"}}}},
		{name: "cmd test ipv6 excludes omitting broadcast", source: "cmd/whereabouts_test.go, excludes a range of IPv6 addresses, omitting broadcast",
			ipam: M{"range": "caa5::0/112", "exclude": []any{"caa5::0/113"}, "gateway": "2001::f:1", "routes": []any{M{"dst": "0.0.0.0/0"}}}},
		{name: "cmd test static parameters", source: "cmd/whereabouts_test.go, can still assign static parameters",
			ipam: M{"range": "192.168.1.44/28", "gateway": "192.168.1.1",
				"routes": []any{M{"dst": "0.0.0.0/0"}, M{"dst": "192.168.0.0/16", "gw": "10.10.5.1"}, M{"dst": "3ffe:ffff:0:01ff::1/64"}},
				"dns":    M{"nameservers": []any{"8.8.8.8"}, "domain": "example.com", "search": []any{"example.com"}}},
			differs: "the main plugin adds 0.0.0.0/0 via 192.168.1.1, which is not on net1's subnet 192.168.1.32/28: its ADD fails (network is unreachable)",
			why:     `field "gateway" = "192.168.1.1": outside every range (192.168.1.32/28), and routes[0] (dst 0.0.0.0/0) has no "gw"`},
		{name: "cmd test ipRanges", source: "cmd/whereabouts_test.go, allocates an address using IPRanges notation",
			ipam: M{"ipRanges": []any{M{"range": "192.168.10.1/24"}}}},
		{name: "cmd test dual stack ipRanges", source: "cmd/whereabouts_test.go, allocates DualStack address using IPRanges notation",
			ipam: M{"ipRanges": []any{M{"range": "192.168.10.1/24"}, M{"range": "abcd::1/64"}}}},
		{name: "cmd test ipRanges and range", source: "cmd/whereabouts_test.go, allocates addresses using both IPRanges and range notations",
			ipam: M{"ipRanges": []any{M{"range": "192.168.10.1/24"}}, "range": "abcd::1/64"}},
		{name: "cmd test start-end notation", source: "cmd/whereabouts_test.go, allocates an address using start/end cidr notation",
			ipam: M{"range": "192.168.1.5-192.168.1.25/24", "gateway": "192.168.10.1"}},
		{name: "cmd test range_start", source: "cmd/whereabouts_test.go, allocates an address using the range_start parameter",
			ipam: M{"range": "192.168.1.0/24", "range_start": "192.168.1.5", "gateway": "192.168.10.1"}},
		{name: "cmd test range_end", source: "cmd/whereabouts_test.go, allocates addresses using range_end as an upper limit",
			ipam: M{"range": "192.168.1.0/24", "range_start": "192.168.1.5", "range_end": "192.168.1.12", "gateway": "192.168.10.1"}},
		{name: "cmd test overlapping ipv4", source: "cmd/whereabouts_test.go, detects IPv4 addresses used in other ranges",
			ipam: M{"range": "192.168.22.0/24"}},
		{name: "cmd test overlapping ipv4 narrower", source: "cmd/whereabouts_test.go, detects IPv4 addresses used in other ranges (second range)",
			ipam: M{"range": "192.168.22.0/28"}},
		{name: "cmd test overlapping ipv6", source: "cmd/whereabouts_test.go, detects IPv6 addresses used in other ranges",
			ipam: M{"range": "2001::1/116"}},
		{name: "cmd test overlapping disabled", source: "cmd/whereabouts_test.go, allows IP collisions across ranges when enable_overlapping_ranges is set to false",
			ipam: M{"range": "192.168.33.0/24", "enable_overlapping_ranges": false}},

		// --- e2e and the node slice controller ---
		{name: "e2e macvlan", source: "e2e/util/util.go, MacvlanNetworkWithWhereaboutsIPAMNetwork (e2e_test.go ranges)",
			ipam: M{"leader_lease_duration": 1500, "leader_renew_deadline": 1000, "leader_retry_period": 500, "range": "10.10.0.0/16",
				"ipRanges": []any{}, "log_level": "debug", "log_file": "wb", "network_name": "", "enable_overlapping_ranges": true}},
		{name: "e2e dual stack ipRanges only", source: "e2e/e2e_test.go, IPRanges configuration only",
			ipam: M{"range": "", "ipRanges": []any{M{"range": "11.11.0.0/16"}, M{"range": "abcd::0/64"}}, "network_name": "", "enable_overlapping_ranges": true}},
		{name: "e2e range with two addresses", source: "e2e/e2e_test.go, rangeWithTwoIPs",
			ipam: M{"range": "10.10.0.0/30", "network_name": "", "enable_overlapping_ranges": true}},
		{name: "e2e node slice", source: "e2e/e2e_node_slice/e2e_node_slice_test.go, /20 slices of 10.0.0.0/8",
			ipam: M{"range": "10.0.0.0/8", "network_name": "wa-nad", "node_slice_size": "/20"}},
		{name: "node controller slices", source: "pkg/node-controller/controller_test.go, newNad (10.0.0.0/8, /10)",
			ipam: M{"range": "10.0.0.0/8", "node_slice_size": "/10", "network_name": "test", "enable_overlapping_ranges": false},
			gap:  "a node's block (one API object) holds at most 4096 addresses: rdmanet's nodes claim /20 blocks, as many as they need, where Whereabouts gives each node one /10 slice; the addresses handed out are the same, the per-node partition is not",
			why:  `field "node_slice_size" = "/10": a node's block holds at most 4096 addresses`},
		{name: "pod controller ipam", source: "pkg/controlloop/entity_generators.go, dummyNetSpec",
			ipam: M{"range": "192.168.2.0/24"}},

		// --- the allocator's reading of bounds (pkg/iphelpers GetIPRange, pkg/allocate tests) ---
		{name: "range_start outside the range", source: "pkg/iphelpers/iphelpers.go GetIPRange: a range_start outside the usable addresses is silently ignored",
			ipam: M{"range": "192.168.2.0/24", "range_start": "192.168.3.5"}, why: `field "range_start" = "192.168.3.5": range_start is not a usable address`},
		{name: "range_end before range_start", source: "pkg/iphelpers/iphelpers.go GetIPRange: a rangeEnd smaller than rangeStart is ignored",
			ipam: M{"range": "192.168.2.0/24", "range_start": "192.168.2.100", "range_end": "192.168.2.50"}, why: `field "range_end" = "192.168.2.50"`},
		{name: "range_end outside the range", source: "pkg/allocate/allocate_test.go, IterateForAssignment with a range_end outside the subnet",
			ipam: M{"range": "192.168.0.0/24", "range_start": "192.168.0.10", "range_end": "192.168.1.10"}, why: `field "range_end" = "192.168.1.10"`},
		{name: "broadcast as range_end", source: "pkg/allocate/allocate_test.go, IterateForAssignment (range end at the broadcast address)",
			ipam: M{"range": "192.168.0.0/24", "range_end": "192.168.0.255"}},
		{name: "ipv6 bounds", source: "pkg/allocate/allocate_test.go, IPv6 with range_start and range_end",
			ipam: M{"range": "fd00::/120", "range_start": "fd00::10", "range_end": "fd00::20", "exclude": []any{"fd00::12/127", "fd00::18"}}},
		{name: "excludes unsorted", source: "pkg/allocate/allocate_test.go, can IterateForAssignment on an IPv4 address excluding unsorted ranges",
			ipam: M{"range": "192.168.0.0/28", "exclude": []any{"192.168.0.0/30", "192.168.0.6/31", "192.168.0.8/31", "192.168.0.4/32"}}},
		{name: "exclude of the other family", source: "README.md Note 1: no double checking of excludes; pkg/allocate: net.IPNet.Contains never matches another family",
			ipam: M{"range": "192.168.0.0/24", "exclude": []any{"fd00::/64", "192.168.0.0/28"}}, why: `field "exclude[0]" = "fd00::/64": address family differs`},
		{name: "exclude not a CIDR", source: "pkg/config/config.go: the exclude list is checked after it was moved into ipRanges (never), pkg/allocate parses it at every ADD",
			ipam:    M{"range": "192.168.0.0/24", "exclude": []any{"192.168.0.300/28"}},
			differs: "Whereabouts accepts the config and then fails every ADD (\"could not parse exclude range\")",
			why:     `field "exclude[0]" = "192.168.0.300/28": not a CIDR or IP address`},
		{name: "exclude with leading zeroes", source: "pkg/allocate/allocate.go parseExcludedRange reads excludes with net.ParseCIDR (strict) although the loader reads ranges sloppily",
			ipam:    M{"range": "192.168.0.0/24", "exclude": []any{"192.168.0.010/31"}},
			differs: "Whereabouts accepts the config and then fails every ADD (\"could not parse exclude range\")",
			why:     `field "exclude[0]" = "192.168.0.010/31"`},
		{name: "exclude everything", source: "pkg/allocate/allocate_test.go, AssignmentError when every address is excluded",
			ipam:    M{"range": "192.168.0.0/29", "exclude": []any{"192.168.0.0/29"}},
			differs: "Whereabouts accepts the config and then fails every ADD (\"Could not allocate IP in range\")",
			why:     "has no usable address left"},
		{name: "ipv4 /32", source: "pkg/iphelpers/iphelpers.go FirstUsableIP: net mask too short for /31 and /32",
			ipam:    M{"range": "192.168.0.7/32"},
			differs: "Whereabouts accepts the config and then fails every ADD (\"net mask is too short\"); rdmanet serves the /32 whole"},

		// --- keys Whereabouts ignores or never released ---
		{name: "range_start garbage", source: "pkg/types/types.go backwardsCompatibleIPAddress: an unparsable top-level range_start becomes nil",
			ipam: M{"range": "192.168.0.0/24", "range_start": "192.168.0.x"}, why: `field "range_start" = "192.168.0.x": not an IP address: ignored`},
		{name: "ipRanges range_start with leading zeroes", source: "pkg/types/types.go: ipRanges entries decode range_start as net.IP (strict)",
			ipam: M{"ipRanges": []any{M{"range": "192.168.0.0/24", "range_start": "192.168.0.010"}}}, why: `field "ipRanges[0].range_start" = "192.168.0.010"`},
		{name: "top-level exclude without range", source: "pkg/config/config.go: the top-level fields are used only when range is set",
			ipam: M{"exclude": []any{"192.168.0.0/28"}, "ipRanges": []any{M{"range": "192.168.0.0/24"}}}, why: `field "exclude" = "192.168.0.0/28": ignored`},
		{name: "historic ranges next to range", source: "unreleased multi-range branch (\"ranges\", later ipRanges); v0.9.2 ignores the key",
			ipam: M{"range": "192.168.0.0/24", "ranges": []any{M{"range": "192.168.1.0/24"}}}, why: `field "ranges": ignored`},
		{name: "historic ranges alone", source: "unreleased multi-range branch (\"ranges\", later ipRanges); v0.9.2 ignores the key",
			ipam:    M{"ranges": []any{M{"range": "192.168.1.0/24", "range_start": "192.168.1.10"}}},
			differs: "Whereabouts ignores the key, hands out no address, and the main plugin's ADD fails (\"IPAM plugin returned missing IP config\"); rdmanet reads it as ipRanges",
			why:     `field "ranges": read as "ipRanges"`},
		{name: "host-local ranges", source: "host-local's \"ranges\" written in a Whereabouts config",
			ipam:    M{"ranges": []any{[]any{M{"subnet": "192.168.1.0/24"}}}},
			differs: "Whereabouts ignores the key, hands out no address, and the main plugin's ADD fails (\"IPAM plugin returned missing IP config\")",
			why:     `field "ranges"`},
		{name: "no range", source: "pkg/config/config.go: LoadIPAMConfig does not require a range",
			ipam:    M{"network_name": "empty"},
			differs: "Whereabouts hands out no address and the main plugin's ADD fails (\"IPAM plugin returned missing IP config\")",
			why:     "no range configured"},

		// --- configs both refuse ---
		{name: "range not a CIDR", source: "pkg/config/config.go: invalid CIDR", ipam: M{"range": "192.168.0.0"}, why: "not a CIDR"},
		{name: "gateway not an address", source: "pkg/config/config.go: couldn't parse gateway IP", ipam: M{"range": "192.168.0.0/24", "gateway": "192.168.0.x"}, why: `field "gateway" = "192.168.0.x"`},
		{name: "dash without prefix", source: "pkg/config/config.go: invalid CIDR (do you have the 'range' parameter set)", ipam: M{"range": "192.168.0.5-192.168.0.9"}, why: "is not a CIDR"},
		{name: "ipRanges entry without range", source: "pkg/config/config.go: invalid CIDR of an empty ipRanges entry", ipam: M{"ipRanges": []any{M{"exclude": []any{"10.0.0.0/28"}}}}, why: `"ipRanges[0].range"`},
	}
}

// effective is what a config means to an allocator.
type effective struct {
	Network     string
	Overlapping bool
	Ranges      []effRange
	Gateway     string
	Routes      []string
	DNS         string
	SliceBits   int
	Kubeconfig  string
	LogFile     string
	LogLevel    string
}

type effRange struct {
	CIDR, First, Last string
	Exclude           []string
}

func upstreamEffective(c *wbtypes.IPAMConfig) (effective, error) {
	e := effective{Network: c.NetworkName, Overlapping: c.OverlappingRanges, Kubeconfig: c.Kubernetes.KubeConfigPath,
		LogFile: c.LogFile, LogLevel: c.LogLevel, DNS: fmt.Sprintf("%+v", c.DNS)}
	if e.Network == "" {
		e.Network = ipam.DefaultNetwork
	}
	if c.Gateway != nil {
		e.Gateway = addr(c.Gateway).String()
	}
	for _, r := range c.Routes {
		e.Routes = append(e.Routes, r.String())
	}
	if c.NodeSliceSize != "" {
		fmt.Sscanf(strings.TrimPrefix(c.NodeSliceSize, "/"), "%d", &e.SliceBits)
	}
	for _, r := range c.IPRanges {
		_, ipnet, err := net.ParseCIDR(r.Range)
		if err != nil {
			return e, fmt.Errorf("range %q: %w", r.Range, err)
		}
		first, last, err := iphelpers.GetIPRange(*ipnet, r.RangeStart, r.RangeEnd)
		if err != nil {
			return e, fmt.Errorf("range %s fails at ADD: %w", r.Range, err)
		}
		er := effRange{CIDR: ipnet.String(), First: addr(first).String(), Last: addr(last).String()}
		var ex []netip.Prefix
		for _, s := range r.OmitRanges {
			p, err := parseExcludedRange(s)
			if err != nil {
				return e, fmt.Errorf("exclude %q fails at ADD: %w", s, err)
			}
			if (len(p.IP) == net.IPv4len) == (ipnet.IP.To4() != nil) { // other families never match (net.IPNet.Contains)
				a, _ := netip.AddrFromSlice(p.IP)
				ones, _ := p.Mask.Size()
				ex = append(ex, netip.PrefixFrom(a, ones))
			}
		}
		er.Exclude = normalize(ex)
		if used, err := usable(*ipnet, first, last, r.OmitRanges); err != nil || !used {
			return e, fmt.Errorf("range %s has no address to hand out: every ADD fails", r.Range)
		}
		e.Ranges = append(e.Ranges, er)
	}
	// The main plugin (containernetworking/plugins pkg/ipam ConfigureIface)
	// adds every route without a "gw" of the gateway's family via the
	// gateway, which Whereabouts returns with each address. The kernel
	// refuses a gateway that is not on one of the interface's subnets.
	if gw := c.Gateway; gw != nil {
		onLink := false
		for _, r := range c.IPRanges {
			if _, ipnet, err := net.ParseCIDR(r.Range); err == nil && ipnet.Contains(gw) {
				onLink = true
			}
		}
		for _, r := range c.Routes {
			if r.GW == nil && (r.Dst.IP.To4() != nil) == (gw.To4() != nil) && !onLink {
				return e, fmt.Errorf("the main plugin's ADD fails: route %s via %s, which is on none of the interface's subnets (network is unreachable)", r.Dst.String(), gw)
			}
		}
	}
	return e, nil
}

// parseExcludedRange is pkg/allocate's (unexported) reading of an exclude.
func parseExcludedRange(s string) (*net.IPNet, error) {
	_, subnet, err := net.ParseCIDR(s)
	if err == nil {
		return subnet, nil
	}
	ip := net.ParseIP(s)
	if ip == nil {
		return nil, err
	}
	if ip.To4() != nil {
		_, subnet, err = net.ParseCIDR(s + "/32")
	} else {
		_, subnet, err = net.ParseCIDR(s + "/128")
	}
	return subnet, err
}

// usable reports whether Whereabouts' allocator finds an address in an
// empty pool (its IterateForAssignment, without a store).
func usable(ipnet net.IPNet, first, last net.IP, excludes []string) (bool, error) {
	var ex []*net.IPNet
	for _, s := range excludes {
		p, err := parseExcludedRange(s)
		if err != nil {
			return false, err
		}
		ex = append(ex, p)
	}
	for ip := first; ipnet.Contains(ip) && iphelpers.CompareIPs(ip, last) <= 0; ip = iphelpers.IncIP(ip) {
		skip := net.IP(nil)
		for _, e := range ex {
			if e.Contains(ip) {
				skip = iphelpers.SubnetBroadcastIP(*e)
				break
			}
		}
		if skip == nil {
			return true, nil
		}
		ip = skip
	}
	return false, nil
}

func rdmanetEffective(c *ipam.Config) effective {
	e := effective{Network: c.Network, Overlapping: c.OverlappingRanges, Kubeconfig: c.Store.Kubeconfig,
		LogFile: c.LogFile, LogLevel: c.LogLevel, DNS: fmt.Sprintf("%+v", c.DNS)}
	if c.Gateway.IsValid() {
		e.Gateway = c.Gateway.String()
	}
	for _, r := range c.Routes {
		e.Routes = append(e.Routes, r.String())
	}
	for _, r := range c.Ranges {
		e.Ranges = append(e.Ranges, effRange{CIDR: r.Prefix.String(), First: r.First.String(), Last: r.Last.String(), Exclude: normalize(slices.Clone(r.Exclude))})
		if e.SliceBits == 0 {
			e.SliceBits = r.BlockBits
		}
	}
	return e
}

func addr(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

// normalize sorts prefixes, masks them and drops those nested in another.
func normalize(in []netip.Prefix) []string {
	for i := range in {
		in[i] = in[i].Masked()
	}
	slices.SortFunc(in, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	out := []string{}
	var last netip.Prefix
	for _, p := range in {
		if last.IsValid() && last.Overlaps(p) {
			continue
		}
		out = append(out, p.String())
		last = p
	}
	return out
}

// run loads one case with both parsers. The flat file lies in a temporary
// directory and is named by configuration_path, which Whereabouts reads
// before its fixed paths; log_file is moved there too.
func run(t *testing.T, tc corpusCase) (up *wbtypes.IPAMConfig, upErr error, rd *ipam.Config, rdErr error) {
	t.Helper()
	dir := t.TempDir()
	flat := tc.flat
	if flat == nil {
		flat = daemonsetFlatFile()
	}
	flat = rebase(flat, dir)
	flatBytes, err := json.Marshal(flat)
	if err != nil {
		t.Fatal(err)
	}
	flatPath := filepath.Join(dir, "whereabouts.conf")
	if err := os.WriteFile(flatPath, flatBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	ipamObj := rebase(tc.ipam, dir)
	ipamObj["type"] = "whereabouts"
	ipamObj["configuration_path"] = flatPath
	conf, err := json.Marshal(M{"cniVersion": "0.3.1", "name": "whereaboutsexample", "type": "macvlan", "master": "eth0", "mode": "bridge", "ipam": ipamObj})
	if err != nil {
		t.Fatal(err)
	}
	up, _, upErr = wbconfig.LoadIPAMConfig(conf, "")
	rd, rdErr = ipam.Parse(conf, ipam.Env{NodeConfig: flatBytes, NodeConfigPath: flatPath})
	return up, upErr, rd, rdErr
}

// rebase copies obj with a relative log_file moved into dir.
func rebase(obj M, dir string) M {
	out := M{}
	for k, v := range obj {
		if s, ok := v.(string); ok && k == "log_file" && !filepath.IsAbs(s) {
			v = filepath.Join(dir, s)
		}
		out[k] = v
	}
	return out
}

func TestMain(m *testing.M) {
	logging.SetLogStderr(false) // Whereabouts logs to stderr by default
	os.Exit(m.Run())
}

// TestWhereaboutsCorpus is the differential test. Run it with -v to see the
// tally: go test -v -run TestWhereaboutsCorpus ./... in test/upstreamipam.
func TestWhereaboutsCorpus(t *testing.T) {
	corpus := whereaboutsCorpus()
	agree, differ, gaps := 0, 0, 0
	for _, tc := range corpus {
		t.Run(tc.name, func(t *testing.T) {
			if tc.source == "" {
				t.Fatal("corpus case without its upstream source")
			}
			up, upErr, rd, rdErr := run(t, tc)
			var upEff effective
			upFails := upErr
			if upErr == nil {
				if upEff, upFails = upstreamEffective(up); upFails == nil && len(upEff.Ranges) == 0 {
					upFails = fmt.Errorf("no range: no address, the main plugin's ADD fails")
				}
			}
			var rdEff effective
			if rdErr == nil {
				rdEff = rdmanetEffective(rd)
			}
			same := (upErr == nil) == (rdErr == nil) && (rdErr != nil || upFails == nil && sameEffective(upEff, rdEff))
			if tc.why != "" {
				text := ""
				if rdErr != nil {
					text = rdErr.Error()
				} else {
					text = strings.Join(rd.Warnings, "\n")
				}
				if !strings.Contains(text, tc.why) {
					t.Errorf("rdmanet's %s lacks %q:\n%s", map[bool]string{true: "error", false: "warnings"}[rdErr != nil], tc.why, text)
				}
			}
			if tc.gap != "" {
				if same {
					t.Errorf("listed as an open gap (%s) but rdmanet now agrees with Whereabouts: remove gap", tc.gap)
				}
				t.Logf("open gap: %s", tc.gap)
				gaps++
				return
			}
			if tc.differs != "" {
				if same {
					t.Errorf("listed as a deliberate difference (%s) but rdmanet now agrees with Whereabouts: remove differs", tc.differs)
				}
				if upFails == nil {
					t.Errorf("listed as a deliberate difference, but Whereabouts' answer does not fail later: %+v", upEff)
				}
				t.Logf("differs deliberately: %s\n  Whereabouts: loader err=%v, later: %v\n  rdmanet: err=%v", tc.differs, upErr, upFails, rdErr)
				differ++
				return
			}
			if !same {
				t.Errorf("rdmanet and Whereabouts disagree (%s)\n  Whereabouts: err=%v later=%v\n    %+v\n  rdmanet: err=%v\n    %+v\n    warnings %q",
					tc.source, upErr, upFails, upEff, rdErr, rdEff, warnings(rd))
				return
			}
			agree++
		})
	}
	t.Logf("Whereabouts v0.9.2 corpus: %d cases, %d agree, %d differ deliberately (Whereabouts fails later), %d open gaps", len(corpus), agree, differ, gaps)
	if agree+differ+gaps != len(corpus) {
		t.Errorf("%d cases neither agree nor are listed as deliberate differences or gaps", len(corpus)-agree-differ-gaps)
	}
}

func warnings(c *ipam.Config) []string {
	if c == nil {
		return nil
	}
	return c.Warnings
}

// sameEffective compares everything but the slice size when Whereabouts
// has none (rdmanet then uses its default block size).
func sameEffective(up, rd effective) bool {
	if up.SliceBits == 0 {
		rd.SliceBits = 0
	}
	return reflect.DeepEqual(up, rd)
}
