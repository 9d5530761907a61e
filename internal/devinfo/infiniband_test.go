package devinfo

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
)

// The IB variants of the seeds' networks, as ib-sriov-cni and ipoib-cni users
// write them (the meta plugin runs them as conflists).
const (
	ibSriovList = `{"cniVersion":"0.3.1","name":"ib-training","plugins":[
	  {"type":"ib-sriov","pkey":"0x8005","link_state":"enable","capabilities":{"infinibandGUID":true},"deviceID":"0000:c1:00.2",
	   "ipam":{"type":"whereabouts","range":"10.61.0.0/16"}},
	  {"type":"rdma"}]}`
	ipoibSingle = `{"cniVersion":"0.3.1","name":"ib-shared","type":"ipoib","master":"ibp193s0f1","pkey":32774,"ipam":{"type":"whereabouts","range":"10.62.0.0/16"}}`
	ipoibAddr   = "00:00:10:49:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:65:8e:82" // 20 bytes: QPN, subnet prefix, port GUID
)

func TestInfiniBandOf(t *testing.T) {
	tests := []struct {
		name, conf, mac string
		want            *InfiniBand
	}{
		{name: "ib-sriov chain: the VF's GUID and the PKey", conf: ibSriovList, mac: "02:00:00:00:00:00:00:01",
			want: &InfiniBand{GUID: "02:00:00:00:00:00:00:01", PKey: "0x8005", Plugin: TypeIBSriov}},
		{name: "ib-sriov GUID in capitals, pkey without 0x", conf: `{"type":"ib-sriov","pkey":"5"}`, mac: "C2:11:22:33:44:55:66:77",
			want: &InfiniBand{GUID: "c2:11:22:33:44:55:66:77", PKey: "0x0005", Plugin: TypeIBSriov}},
		{name: "ib-sriov without pkey", conf: `{"plugins":[{"type":"ib-sriov"}]}`, mac: "02:00:00:00:00:00:00:09",
			want: &InfiniBand{GUID: "02:00:00:00:00:00:00:09", Plugin: TypeIBSriov}},
		{name: "ib-sriov with an Ethernet MAC (not a GUID)", conf: `{"type":"ib-sriov","pkey":"0x8005"}`, mac: "02:00:00:41:00:02",
			want: &InfiniBand{PKey: "0x8005", Plugin: TypeIBSriov}},
		{name: "ipoib: the shared port's GUID from the IPoIB address, numeric pkey", conf: ipoibSingle, mac: ipoibAddr,
			want: &InfiniBand{GUID: "0c:42:a1:03:00:65:8e:82", PKey: "0x8006", Plugin: TypeIPoIB}},
		{name: "ipoib stand-in with a 6-byte MAC", conf: ipoibSingle, mac: "02:00:00:81:00:00",
			want: &InfiniBand{PKey: "0x8006", Plugin: TypeIPoIB}},
		{name: "sriov (RoCE) is not IB", conf: `{"plugins":[{"type":"sriov"},{"type":"rdma"}]}`, mac: "02:00:00:41:00:02"},
		{name: "macvlan is not IB", conf: `{"type":"macvlan","master":"ens8f0np0"}`},
		{name: "not JSON", conf: `{`},
		{name: "unreadable pkey left out", conf: `{"type":"ib-sriov","pkey":"zz"}`, mac: "02:00:00:00:00:00:00:01",
			want: &InfiniBand{GUID: "02:00:00:00:00:00:00:01", Plugin: TypeIBSriov}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := InfiniBandOf([]byte(tc.conf), tc.mac)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("InfiniBandOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestNetworkStatusExtension: the entry marshals as Multus' plus
// "infiniband"; Multus' own type reads it unchanged (the key is ignored);
// PodGUIDs reads the pod's own GUIDs back.
func TestNetworkStatusExtension(t *testing.T) {
	entries := []NetworkStatus{
		{NetworkStatus: nadv1.NetworkStatus{Name: "cluster", Interface: "eth0", IPs: []string{"10.244.3.5"}, Default: true}},
		{NetworkStatus: nadv1.NetworkStatus{Name: "ai-training/ib-training", Interface: "net1", IPs: []string{"10.61.0.2"}, Mac: "02:00:00:00:00:00:00:01",
			DeviceInfo: PCI("0000:c1:00.2", "", "mlx5_5")},
			InfiniBand: InfiniBandOf([]byte(ibSriovList), "02:00:00:00:00:00:00:01")},
		{NetworkStatus: nadv1.NetworkStatus{Name: "ai-training/ib-shared", Interface: "net2", Mac: ipoibAddr},
			InfiniBand: InfiniBandOf([]byte(ipoibSingle), ipoibAddr)},
	}
	b, err := json.Marshal(entries)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{
		`"infiniband":{"guid":"02:00:00:00:00:00:00:01","pkey":"0x8005","plugin":"ib-sriov"}`,
		`"device-info":{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:c1:00.2","rdma-device":"mlx5_5"}}`,
		`"mac":"02:00:00:00:00:00:00:01"`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("annotation lacks %s:\n%s", want, s)
		}
	}
	if strings.Count(s, `"infiniband"`) != 2 {
		t.Errorf("want the extension on the two IB entries only:\n%s", s)
	}
	var multus []nadv1.NetworkStatus
	if err := json.Unmarshal(b, &multus); err != nil {
		t.Fatalf("Multus' type refuses the extended annotation: %v", err)
	}
	for i := range entries {
		if !reflect.DeepEqual(multus[i], entries[i].NetworkStatus) {
			t.Errorf("entry %d as Multus reads it: %+v, want %+v", i, multus[i], entries[i].NetworkStatus)
		}
	}
	back, err := ParseNetworkStatus(s)
	if err != nil || !reflect.DeepEqual(back, entries) {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	got := PodGUIDs(s)
	if want := map[string]PodGUID{"02:00:00:00:00:00:00:01": {PKey: "0x8005", Network: "ai-training/ib-training"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("PodGUIDs = %v, want %v (the ipoib port GUID is shared, not the pod's)", got, want)
	}
	if got := PodGUIDs("not json"); got != nil {
		t.Errorf("PodGUIDs of garbage = %v", got)
	}
}

func TestClaimData(t *testing.T) {
	if ClaimData(nil) != nil {
		t.Error("ClaimData(nil) is not nil")
	}
	d := ClaimData(&InfiniBand{GUID: "02:00:00:00:00:00:00:01", PKey: "0x8005", Plugin: TypeIBSriov})
	want := `{"infiniband":{"guid":"02:00:00:00:00:00:00:01","pkey":"0x8005","plugin":"ib-sriov"}}`
	if d == nil || string(d.Raw) != want {
		t.Fatalf("ClaimData = %s, want %s", d.Raw, want)
	}
}

// TestStatuses: Multus entries wrapped without the extension marshal
// byte for byte as Multus' own list.
func TestStatuses(t *testing.T) {
	tests := []struct {
		name string
		in   []nadv1.NetworkStatus
	}{
		{name: "nil stays nil (JSON null, as Multus' nil list)", in: nil},
		{name: "empty", in: []nadv1.NetworkStatus{}},
		{name: "default and a VF with device-info", in: []nadv1.NetworkStatus{
			{Name: "cluster", Interface: "eth0", IPs: []string{"10.244.0.10"}, Mac: "0a:58:0a:f4:00:0a", Default: true},
			{Name: "ai-training/face-training-rdma", Interface: "net1", IPs: []string{"10.60.1.5"}, Mac: "02:00:0a:3c:01:05",
				DeviceInfo: PCI("0000:3b:02.0", "0000:3b:00.0", "mlx5_2")},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Statuses(tt.in)
			if (got == nil) != (tt.in == nil) || len(got) != len(tt.in) {
				t.Fatalf("Statuses(%v) = %v", tt.in, got)
			}
			for i := range got {
				if got[i].InfiniBand != nil || !reflect.DeepEqual(got[i].NetworkStatus, tt.in[i]) {
					t.Errorf("entry %d = %+v, want %+v without the extension", i, got[i], tt.in[i])
				}
			}
			want, _ := json.Marshal(tt.in)
			b, err := json.Marshal(got)
			if err != nil || string(b) != string(want) {
				t.Errorf("marshals as %s (%v), want Multus' %s", b, err, want)
			}
		})
	}
}
