package meta

import (
	"net"
	"reflect"
	"strings"
	"testing"
)

func TestParseNetworksGolden(t *testing.T) {
	tests := []struct {
		name  string
		value string
		want  []Selection
	}{
		{"empty", "", nil},
		{"NPWG short form, three networks", "net-a,net-b,other-ns/net-c", []Selection{
			{Namespace: "ns1", Name: "net-a", Interface: "net1"},
			{Namespace: "ns1", Name: "net-b", Interface: "net2"},
			{Namespace: "other-ns", Name: "net-c", Interface: "net3"},
		}},
		{"short form with interfaces and spaces", "net-a, other-ns/net-b@net2", []Selection{
			{Namespace: "ns1", Name: "net-a", Interface: "net1"},
			{Namespace: "other-ns", Name: "net-b", Interface: "net2"},
		}},
		{"seed: SR-IOV route with @eth1", "sriov-rdma-net@eth1", []Selection{{Namespace: "ns1", Name: "sriov-rdma-net", Interface: "eth1"}}},
		{"Multus doc: macvlan-conf@macvlan1", "macvlan-conf@macvlan1", []Selection{{Namespace: "ns1", Name: "macvlan-conf", Interface: "macvlan1"}}},
		{"empty interface after @ means the default name, as in Multus", "net-a@", []Selection{{Namespace: "ns1", Name: "net-a", Interface: "net1"}}},
		{"spaces around separators, as Multus trims them", " other-ns / net-b @ net2 ", []Selection{{Namespace: "other-ns", Name: "net-b", Interface: "net2"}}},
		{"JSON interfaceRequest, the pre-3.2 spelling Multus still reads", `[{"name":"net-a","interfaceRequest":"net7"}]`, []Selection{{Namespace: "ns1", Name: "net-a", Interface: "net7"}}},
		{"default names skip chosen ones", "a@net1,b", []Selection{
			{Namespace: "ns1", Name: "a", Interface: "net1"},
			{Namespace: "ns1", Name: "b", Interface: "net2"},
		}},
		{"seed: JSON form of the face-trainer Job", "[{\"name\": \"face-training-rdma\", \"interface\": \"net1\"}]\n", []Selection{
			{Namespace: "ns1", Name: "face-training-rdma", Interface: "net1"},
		}},
		{"NPWG JSON form with every field", `[{"name":"net-b","namespace":"other-ns","interface":"eth1","mac":"02:23:45:67:89:01","ips":["10.2.2.42/24"],
			"default-route":["10.2.2.1"],"cni-args":{"foo":"bar"},"deviceID":"0000:41:00.3","infiniband-guid":"c2:11:22:33:44:55:66:77"}]`, []Selection{{
			Namespace: "other-ns", Name: "net-b", Interface: "eth1", MAC: "02:23:45:67:89:01", IPs: []string{"10.2.2.42/24"},
			DefaultRoute: []net.IP{net.ParseIP("10.2.2.1")}, CNIArgs: map[string]any{"foo": "bar"}, DeviceID: "0000:41:00.3",
			InfinibandGUID: "c2:11:22:33:44:55:66:77",
		}}},
		{"Multus doc: default-route", `[{ "name" : "macvlan-conf", "interface": "net3", "default-route": ["10.1.1.1"] }]`, []Selection{{
			Namespace: "ns1", Name: "macvlan-conf", Interface: "net3", DefaultRoute: []net.IP{net.ParseIP("10.1.1.1")},
		}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseNetworks(tc.value, "ns1", "ns1/pod")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseNetworksErrors(t *testing.T) {
	tests := []struct {
		name  string
		value string
		want  string
	}{
		{"stray comma", "net-a,,net-b", "entry 1 is empty"},
		{"two slashes (Multus refuses)", "a/b/c", "failed at '/'"},
		{"two @ (Multus refuses)", "net-a@net1@net2", "failed at '@'"},
		{"dotted name in the short form (Multus refuses)", "sriov.rdma", `name "sriov.rdma" is not a DNS-1123 label`},
		{"a quote selects the JSON form, as in Multus", `net-a@"x"`, "not a valid JSON list"},
		{"only spaces: Multus reads an empty name", "  ", "only spaces"},
		{"no name before @: Multus fails later", "@net1", "has no network name"},
		{"null JSON element: Multus crashes", `[null]`, "element 0 is null"},
		{"bad infiniband-guid (Multus refuses)", `[{"name":"a","infiniband-guid":"zz"}]`, `infiniband-guid "zz"`},
		{"upper case name", "Net-A", `name "Net-A" is not a DNS-1123 label`},
		{"bad namespace", "Bad_NS/net", `namespace "Bad_NS"`},
		{"long interface", "net@averyveryverylongname", "not a Linux interface name"},
		{"JSON interface with '/': Multus takes it, the kernel refuses it later", `[{"name":"a","interface":"a/b"}]`, "not a valid Linux interface name"},
		{"duplicate interface", "a@net1,b@net1", `interface "net1" is requested more than once`},
		{"eth0 taken", "a@eth0", "eth0, which belongs to the cluster's default network"},
		{"object instead of list", `{"name":"a"}`, "wrap the object in [ ]"},
		{"bad JSON", `[{"name": "a"`, "not a valid JSON list"},
		{"JSON without name", `[{"interface":"net1"}]`, `element 0 has no "name"`},
		{"bad mac", `[{"name":"a","mac":"zz"}]`, `mac "zz"`},
		{"bad ip", `[{"name":"a","ips":["10.0.0.300/24"]}]`, `ips entry "10.0.0.300/24"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseNetworks(tc.value, "ns1", "ns1/trainer-0")
			if err == nil {
				t.Fatal("want an error")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "pod ns1/trainer-0") || !strings.Contains(err.Error(), NetworksAnnotation) {
				t.Fatalf("error %q must name the pod, the annotation and %q", err, tc.want)
			}
		})
	}
}

func FuzzParseNetworks(f *testing.F) {
	for _, s := range []string{"net-a,other-ns/net-b@net2", `[{"name":"a","interface":"net1","ips":["10.0.0.1/24"],"default-route":["10.0.0.254"]}]`, "a@b,c", "[]", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		sels, err := ParseNetworks(v, "ns", "ns/p")
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, s := range sels {
			if s.Name == "" || s.Namespace == "" || s.Interface == "" {
				t.Fatalf("unfilled selection %+v from %q", s, v)
			}
			if seen[s.Interface] {
				t.Fatalf("duplicate interface %q from %q", s.Interface, v)
			}
			seen[s.Interface] = true
		}
	})
}

func TestParseConfig(t *testing.T) {
	multus := `{"cniVersion":"0.3.1","name":"multus-cni-network","type":"rdmanet","kubeconfig":"/etc/cni/net.d/multus.d/multus.kubeconfig",
		"confDir":"/etc/cni/multus/net.d","cniDir":"/var/lib/cni/multus","binDir":"/opt/cni/bin","logFile":"/var/log/multus.log","logLevel":"debug",
		"capabilities":{"portMappings":true},"namespaceIsolation":true,"globalNamespaces":"default,kube-system","clusterNetwork":"k8s-pod-network",
		"defaultNetworks":[],"systemNamespaces":["kube-system"],"multusNamespace":"kube-system","readinessindicatorfile":"","retryDeleteOnError":false}`
	c, err := ParseConfig([]byte(multus))
	if err != nil {
		t.Fatalf("Multus' documented config must parse: %v", err)
	}
	if !c.NamespaceIsolation || !reflect.DeepEqual(c.GlobalNamespaces, []string{"default", "kube-system"}) || c.CNIDir != "/var/lib/cni/multus" || c.DelTimeoutDur != DefaultDelTimeout {
		t.Fatalf("parsed %+v", c)
	}
	bad := []struct {
		name, conf, want string
	}{
		{"not json", `{`, "not valid JSON"},
		{"no default network", `{"cniVersion":"1.0.0","name":"x","type":"rdmanet","kubeconfig":"k"}`, "clusterNetwork"},
		{"both defaults", `{"cniVersion":"1.0.0","name":"x","type":"rdmanet","kubeconfig":"k","clusterNetwork":"a","delegates":[{"type":"bridge"}]}`, "ambiguous"},
		{"no kubeconfig", `{"cniVersion":"1.0.0","name":"x","type":"rdmanet","clusterNetwork":"a"}`, "kubeconfig"},
		{"static without dir", `{"cniVersion":"1.0.0","name":"x","type":"rdmanet","clusterNetwork":"a","source":{"type":"static"}}`, "source.dir"},
		{"bad source", `{"cniVersion":"1.0.0","name":"x","type":"rdmanet","clusterNetwork":"a","source":{"type":"etcd"}}`, `source.type = "etcd"`},
		{"bad timeout", `{"cniVersion":"1.0.0","name":"x","type":"rdmanet","clusterNetwork":"a","kubeconfig":"k","delTimeout":"soon"}`, `delTimeout = "soon"`},
		{"bad log level", `{"cniVersion":"1.0.0","name":"x","type":"rdmanet","clusterNetwork":"a","kubeconfig":"k","logLevel":"loud"}`, `logLevel = "loud"`},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.conf))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "fix:") {
				t.Fatalf("err = %v, want %q with a fix", err, tc.want)
			}
		})
	}
}
