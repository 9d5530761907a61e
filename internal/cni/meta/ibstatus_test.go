package meta

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	nadutils "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/utils"

	"github.com/rdmanet/rdmanet/internal/devinfo"
)

// Delegate configs as the meta plugin runs them (conflists, deviceID
// injected): the IB networks as ib-sriov-cni and ipoib-cni users write them
// (internal/sim/manifests/ib-*-nad.yaml), the seed's macvlan one, the
// cluster network.
const (
	ibSriovConf = `{"cniVersion":"0.3.1","name":"ib-training-rdma","plugins":[{"type":"ib-sriov","pkey":"0x8005","link_state":"enable",` +
		`"rdmaIsolation":true,"ibKubernetesEnabled":false,"capabilities":{"infinibandGUID":true},"deviceID":"0000:c1:00.2",` +
		`"ipam":{"type":"whereabouts","range":"10.61.0.0/16","exclude":["10.61.0.0/24"]}}]}`
	ipoibConf = `{"cniVersion":"0.3.1","name":"ib-shared-rdma","plugins":[{"type":"ipoib","master":"ibp193s0f1","pkey":"0x8006",` +
		`"ipam":{"type":"whereabouts","range":"10.62.0.0/16"}}]}`
	macvlanConf = `{"cniVersion":"0.3.1","name":"shared-rdma","plugins":[{"type":"macvlan","master":"ens1f0np0","mode":"bridge",` +
		`"ipam":{"type":"whereabouts","range":"10.60.0.0/16"}}]}`
	clusterConf = `{"cniVersion":"1.0.0","name":"cluster","plugins":[{"type":"ptp","ipam":{"type":"host-local","subnet":"10.244.0.0/24"}}]}`
)

// TestStatusesInfiniBand: an ib-sriov attachment's network-status entry
// carries its GUID (the result's 8-byte MAC), the network's PKey and the
// plugin; an ipoib one the port GUID of its IPoIB address; a macvlan and the
// cluster network none, and every entry is otherwise Multus' own, byte for
// byte, as the pod's annotation (the static source's file) holds it.
func TestStatusesInfiniBand(t *testing.T) {
	const guid = "02:00:00:00:00:00:00:01"
	const ipoibMAC = "00:00:10:49:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:65:8e:82"
	tests := []struct {
		name, network, ifname, conf, mac, cidr string
		deviceID                               string
		want                                   string // the entry's "infiniband" value; "" = no key
	}{
		{name: "cluster network", network: "cluster", ifname: "eth0", conf: clusterConf, mac: "0a:58:0a:f4:00:05", cidr: "10.244.0.5/24"},
		{name: "ib-sriov: the pod's GUID and PKey 0x8005", network: "ai-training/ib-training-rdma", ifname: "net1", conf: ibSriovConf,
			mac: guid, cidr: "10.61.1.2/16", deviceID: "0000:c1:00.2",
			want: `{"guid":"` + guid + `","pkey":"0x8005","plugin":"ib-sriov"}`},
		{name: "ipoib: the shared port's GUID", network: "ai-training/ib-shared-rdma", ifname: "net2", conf: ipoibConf,
			mac: ipoibMAC, cidr: "10.62.1.2/16",
			want: `{"guid":"0c:42:a1:03:00:65:8e:82","pkey":"0x8006","plugin":"ipoib"}`},
		{name: "macvlan: none", network: "ai-training/shared-rdma", ifname: "net3", conf: macvlanConf, mac: "02:11:22:33:44:55", cidr: "10.60.1.2/16"},
	}
	rec := &Record{Pod: "ai/trainer-0"}
	var results []types.Result
	for i, tt := range tests {
		rec.Delegates = append(rec.Delegates, &Delegate{Network: tt.network, IfName: tt.ifname, Conf: json.RawMessage(tt.conf),
			DeviceID: tt.deviceID, IsDefault: i == 0})
		ip, ipn, err := net.ParseCIDR(tt.cidr)
		if err != nil {
			t.Fatal(err)
		}
		ipn.IP = ip
		results = append(results, &current.Result{CNIVersion: "1.0.0",
			Interfaces: []*current.Interface{{Name: tt.ifname, Mac: tt.mac, Sandbox: "/var/run/netns/trainer-0"}},
			IPs:        []*current.IPConfig{{Interface: current.Int(0), Address: *ipn}}})
	}
	p := &Plugin{Conf: &NetConf{}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	sts, err := p.statuses(rec, results)
	if err != nil {
		t.Fatal(err)
	}
	if len(sts) != len(tests) {
		t.Fatalf("statuses = %+v, want %d entries", sts, len(tests))
	}

	// As the pod's annotation holds it: the static source's file, written
	// as KubeSource writes the annotation (indented JSON).
	dir := t.TempDir()
	writePodManifest(t, dir, "trainer-0", "uid-0")
	src := &StaticSource{Dir: dir, StatusDir: t.TempDir()}
	if err := src.SetNetworkStatus(context.Background(), "ai", "trainer-0", "uid-0", sts); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(src.StatusPath("ai", "trainer-0"))
	if err != nil {
		t.Fatal(err)
	}
	var entries []map[string]json.RawMessage
	if err := json.Unmarshal(b, &entries); err != nil || len(entries) != len(tests) {
		t.Fatalf("network-status %s: %v, want %d entries", b, err, len(tests))
	}
	var multus []nadv1.NetworkStatus // what Multus' reader makes of the annotation
	if err := json.Unmarshal(b, &multus); err != nil {
		t.Fatalf("Multus' type refuses the annotation: %v\n%s", err, b)
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := entries[i]["infiniband"]
			var compact bytes.Buffer
			if ok {
				_ = json.Compact(&compact, got)
			}
			if compact.String() != tt.want {
				t.Fatalf("entry %d \"infiniband\" = %q, want %q\n%s", i, compact.String(), tt.want, b)
			}
			// Everything else is Multus' entry for the same result.
			var dev *nadv1.DeviceInfo
			if tt.deviceID != "" {
				dev = devinfo.PCI(tt.deviceID, "", "")
			}
			ms, err := nadutils.CreateNetworkStatuses(results[i], tt.network, i == 0, dev)
			if err != nil || len(ms) != 1 {
				t.Fatalf("Multus' CreateNetworkStatuses: %v %v", ms, err)
			}
			wantEntry, _ := json.Marshal(ms[0])
			delete(entries[i], "infiniband")
			gotEntry, _ := json.Marshal(entries[i]) // keys sorted: compare as maps
			var w map[string]json.RawMessage
			_ = json.Unmarshal(wantEntry, &w)
			wantSorted, _ := json.Marshal(w)
			if string(gotEntry) != string(wantSorted) {
				t.Errorf("entry %d without the extension:\n got %s\nwant %s (Multus)", i, gotEntry, wantSorted)
			}
			if tt.want == "" {
				one, _ := json.Marshal(sts[i])
				if string(one) != string(wantEntry) {
					t.Errorf("non-IB entry marshals as %s, want Multus' %s byte for byte", one, wantEntry)
				}
			}
			if multus[i].Mac != tt.mac || multus[i].Interface != tt.ifname {
				t.Errorf("Multus reads entry %d as %+v", i, multus[i])
			}
		})
	}
}
