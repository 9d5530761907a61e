package upstreamconfigs

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/rdmanet/rdmanet/internal/manifest"
)

// netCase is one k8s.v1.cni.cncf.io/networks value, written for this test
// to reproduce a case of Multus' docs, examples or tests (named in the
// entry), or a rule its parser enforces. differ: both rdmanet parsers refuse
// what Multus takes and fails on later, why. metaDiffer: the same for the
// meta-CNI's parser alone (lint reports those cases through other rules).
type netCase struct {
	Name       string    `json:"name"`
	Value      string    `json:"value"`
	Differ     string    `json:"differ,omitempty"`
	MetaDiffer string    `json:"metaDiffer,omitempty"`
	Multus     netResult `json:"multus"`
}

var netCorpus = []netCase{
	// Multus docs/how-to-use.md and quickstart
	{Name: "docs: one network by name", Value: "macvlan-conf"},
	{Name: "docs: two networks, comma-separated", Value: "macvlan-conf,sriov-conf"},
	{Name: "docs: a network in another namespace", Value: "testns/macvlan-conf"},
	{Name: "docs: an interface name after @", Value: "macvlan-conf@macvlan1"},
	{Name: "docs: namespace, name and interface", Value: "testns/macvlan-conf@net2"},
	{Name: "docs: the JSON form with an interface", Value: `[{"name":"macvlan-conf","interface":"net1"}]`},
	{Name: "docs: the JSON form, the same network twice", Value: `[{"name":"macvlan-conf"},{"name":"macvlan-conf","interface":"net2"}]`},
	{Name: "docs: JSON with namespace", Value: `[{"name":"macvlan-conf","namespace":"testns","interface":"net1"}]`},
	{Name: "docs: default-route", Value: `[{"name":"macvlan-conf","interface":"net3","default-route":["10.1.1.1"]}]`},
	{Name: "docs: static ips and mac", Value: `[{"name":"macvlan-conf","ips":["10.1.1.101/24"],"mac":"c2:b0:57:49:47:f1"}]`},
	{Name: "docs: an IP without a prefix length", Value: `[{"name":"macvlan-conf","ips":["10.1.1.101"]}]`},
	{Name: "docs: cni-args", Value: `[{"name":"macvlan-conf","cni-args":{"foo":"bar"}}]`},
	{Name: "docs: infiniband-guid", Value: `[{"name":"ib-sriov","infiniband-guid":"c2:11:22:33:44:55:66:77"}]`},
	{Name: "docs: the pre-3.2 interfaceRequest key", Value: `[{"name":"macvlan-conf","interfaceRequest":"net5"}]`},
	// Multus pkg/k8sclient tests
	{Name: "k8sclient_test: net1,net2", Value: "net1,net2"},
	{Name: "k8sclient_test: kube-system/net1", Value: "kube-system/net1"},
	{Name: "k8sclient_test: invalid JSON [adsfasdfasdfasf]", Value: "[adsfasdfasdfasf]"},
	{Name: "k8sclient_test: no annotation value", Value: ""},
	// parsePodNetworkObjectName's rules
	{Name: "rule: spaces around items and separators are trimmed", Value: " testns / macvlan-conf @ net1 , sriov-conf "},
	{Name: "rule: two @ are refused", Value: "macvlan-conf@net1@net2"},
	{Name: "rule: two / are refused", Value: "a/b/macvlan-conf"},
	{Name: "rule: a namespace that is not a DNS-1123 label is refused", Value: "Test_NS/macvlan-conf"},
	{Name: "rule: an upper-case name is refused", Value: "Macvlan-Conf"},
	{Name: "rule: a dotted name is refused in the short form", Value: "sriov.rdma"},
	{Name: "rule: a dotted name is taken in the JSON form", Value: `[{"name":"sriov.rdma"}]`},
	{Name: "rule: a name ending in '-' is refused", Value: "macvlan-"},
	{Name: "rule: an interface of 16 bytes is refused", Value: "macvlan-conf@abcdefghijklmnop"},
	{Name: "rule: an interface of 15 bytes is taken", Value: "macvlan-conf@abcdefghijklmno"},
	{Name: "rule: an empty interface after @ is no interface", Value: "macvlan-conf@"},
	{Name: "rule: an empty namespace before / is the pod's", Value: "/macvlan-conf"},
	{Name: "rule: a quote anywhere selects the JSON form", Value: `macvlan-conf@"net1"`},
	{Name: "rule: a bare JSON object is refused", Value: `{"name":"macvlan-conf"}`},
	{Name: "rule: a bad mac is refused", Value: `[{"name":"macvlan-conf","mac":"zz:zz"}]`},
	{Name: "rule: a bad CIDR is refused", Value: `[{"name":"macvlan-conf","ips":["10.1.1.1/33"]}]`},
	{Name: "rule: a bad IP is refused", Value: `[{"name":"macvlan-conf","ips":["10.1.1.300"]}]`},
	{Name: "rule: a bad default-route is refused", Value: `[{"name":"macvlan-conf","default-route":["10.1.1"]}]`},
	{Name: "rule: a bad infiniband-guid is refused", Value: `[{"name":"ib-sriov","infiniband-guid":"xyz"}]`},
	{Name: "rule: JSON keys in another case are read", Value: `[{"Name":"macvlan-conf","Interface":"net1"}]`},
	// taken by Multus, failing later
	{Name: "later: a stray comma is an empty name", Value: "macvlan-conf,,sriov-conf",
		Differ: "Multus looks up a NetworkAttachmentDefinition with an empty name and fails"},
	{Name: "later: @net1 without a name", Value: "@net1",
		Differ: "Multus looks up a NetworkAttachmentDefinition with an empty name and fails"},
	{Name: "later: only spaces", Value: "   ",
		Differ: "Multus reads one network with an empty name and fails"},
	{Name: "later: a JSON element without a name", Value: `[{"interface":"net1"}]`,
		Differ: "Multus looks up a NetworkAttachmentDefinition with an empty name and fails"},
	{Name: "rule: a null JSON element (Multus crashes on it)", Value: `[null]`},
	{Name: "later: a JSON namespace that is not a namespace name", Value: `[{"name":"macvlan-conf","namespace":"Test_NS"}]`,
		MetaDiffer: "no namespace can have that name: the NetworkAttachmentDefinition lookup fails (lint reports it as a missing NAD)"},
	{Name: "later: a JSON interface with '/'", Value: `[{"name":"macvlan-conf","interface":"net/1"}]`,
		MetaDiffer: "the kernel refuses the interface name when the delegate renames the link"},
	{Name: "later: the same interface twice", Value: "macvlan-conf@net1,sriov-conf@net1",
		MetaDiffer: "the second delegate finds net1 taken in the pod and fails"},
	{Name: "later: eth0 asked for", Value: "macvlan-conf@eth0",
		MetaDiffer: "eth0 is the cluster network's interface; the delegate finds it taken and fails"},
}

// lintResult is rdmanet's lint/webhook reading (internal/manifest).
func lintResult(value string) netResult {
	sels, err := manifest.ParseNetworks(manifest.NetworksAnnotation, value)
	if err != nil {
		return netResult{Err: err.Error()}
	}
	res := netResult{OK: true}
	for _, s := range sels {
		ns, ifname := s.Namespace, ""
		if ns == "" {
			ns = "ns1"
		}
		if s.InterfaceExplicit {
			ifname = s.Interface
		}
		res.Networks = append(res.Networks, ns+"/"+s.Name+"@"+ifname)
	}
	return res
}

var update = flag.Bool("update", false, "rewrite the Multus golden file the meta-CNI's test reads")

// goldenPath is read by internal/cni/meta's TestParseNetworksAsMultus,
// which cannot import Multus (its kubelet API is older than the one the
// meta-CNI speaks; see README.md).
var goldenPath = filepath.Join("..", "..", "internal", "cni", "meta", "testdata", "multus-networks.json")

// TestNetworksAnnotationAsMultus is the differential test of the networks
// annotation: Multus' parser next to lint's, and Multus' answers recorded
// for the meta-CNI's.
func TestNetworksAnnotationAsMultus(t *testing.T) {
	var agree, differ int
	var golden []netCase
	for _, c := range netCorpus {
		t.Run(c.Name, func(t *testing.T) {
			up := multusReal(c.Value)
			c.Multus = up
			golden = append(golden, c)
			rd := lintResult(c.Value)
			same := up.OK == rd.OK && (!up.OK || reflect.DeepEqual(up.Networks, rd.Networks))
			switch {
			case c.Differ == "" && !same:
				t.Errorf("lint differs from Multus:\n Multus ok=%v %v %s\n lint   ok=%v %v %s", up.OK, up.Networks, up.Err, rd.OK, rd.Networks, rd.Err)
			case c.Differ != "" && same:
				t.Errorf("listed as a deliberate difference (%s) but lint agrees with Multus", c.Differ)
			case c.Differ != "":
				differ++
				t.Logf("DIFFERS (%s): lint says %s", c.Differ, rd.Err)
			default:
				agree++
				if !rd.OK {
					t.Logf("refused by both; lint says %s", rd.Err)
				}
			}
		})
	}
	t.Logf("networks annotation corpus: %d entries; lint agrees with Multus on %d, differs deliberately on %d", len(netCorpus), agree, differ)
	b, err := json.MarshalIndent(golden, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	if *update {
		if err := os.WriteFile(goldenPath, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	cur, err := os.ReadFile(goldenPath)
	if err != nil || string(cur) != string(b) {
		t.Errorf("%s is not what Multus answers on this corpus (%v); run: go test -run TestNetworksAnnotationAsMultus -update", goldenPath, err)
	}
}

func (r netResult) String() string { return fmt.Sprintf("ok=%v %v %s", r.OK, r.Networks, r.Err) }
