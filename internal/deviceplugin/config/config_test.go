package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestSeedConfigsLoadUnchanged(t *testing.T) {
	sriov := Pool{Kind: Exclusive, Prefix: "example.com", Name: "sriov_rdma",
		Selectors: []SriovSelector{{Vendors: []string{"15b3"}, PFNames: []PFName{{Name: "enp65s0f0np0"}}, IsRdma: true}}}
	shared := Pool{Kind: Shared, Prefix: "rdma", Name: "rdma_shared_device_eth", RdmaHcaMax: 63,
		Shared: SharedSelector{IfNames: []string{"ens8f0np0"}}}
	spider := Pool{Kind: Shared, Prefix: "spidernet.io", Name: "hca_shared_devices", RdmaHcaMax: 500,
		Shared: SharedSelector{Vendors: []string{"15b3"}, DeviceIDs: []string{"1017"}}}
	tests := []struct {
		name string
		file string
		want []Pool
	}{
		{"seed sriovdp ConfigMap", "sriovdp-config.yaml", []Pool{sriov}},
		{"seed sriovdp config.json", "sriovdp-config.json", []Pool{sriov}},
		{"seed NicClusterPolicy with MacvlanNetwork", "nicclusterpolicy.yaml", []Pool{shared}},
		{"rdma-shared-dev-plugin config", "rdma-shared-config.json", []Pool{shared}},
		{"spiderpool helm values as config", "spiderpool-shared.json", []Pool{spider}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Parse(tc.file, data)
			if err != nil {
				t.Fatal(err)
			}
			for i := range got {
				got[i].Origin = ""
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestBothKeysInOneFileAndSelectorForms(t *testing.T) {
	data := `{
	  "resourceList": [
	    {"resourceName": "a", "selectors": {"vendors": ["0x15B3"], "devices": ["101e"], "drivers": ["mlx5_core"],
	      "pciAddresses": ["0000:41:00.2"], "pfNames": ["ens1f0#0-3,7"], "rootDevices": ["0000:41:00.0"], "linkTypes": ["ether"], "isRdma": true}},
	    {"resourcePrefix": "example.com", "resourceName": "b", "selectors": [{"pfNames": ["p0"]}, {"linkTypes": ["infiniband"]}]}
	  ],
	  "configList": [{"resourceName": "c", "rdmaHcaMax": 5, "devices": ["ens8f0np0"], "selectors": {"linkTypes": ["ether"]}}]
	}`
	got, err := Parse("both.json", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("pools = %d, want 3", len(got))
	}
	a := got[0]
	if a.Resource() != "intel.com/a" || a.Kind != Exclusive {
		t.Errorf("a = %s %s, want the SR-IOV DP default prefix", a.Resource(), a.Kind)
	}
	wantSel := SriovSelector{Vendors: []string{"15b3"}, Devices: []string{"101e"}, Drivers: []string{"mlx5_core"},
		PCIAddresses: []string{"0000:41:00.2"}, PFNames: []PFName{{Name: "ens1f0", VFs: []int{0, 1, 2, 3, 7}}},
		RootDevices: []string{"0000:41:00.0"}, LinkTypes: []string{"ether"}, IsRdma: true}
	if !reflect.DeepEqual(a.Selectors, []SriovSelector{wantSel}) {
		t.Errorf("selectors = %+v", a.Selectors)
	}
	if len(got[1].Selectors) != 2 || got[1].Selectors[1].LinkTypes[0] != LinkInfiniBand {
		t.Errorf("list selectors = %+v", got[1].Selectors)
	}
	c := got[2]
	if c.Resource() != "rdma/c" || c.RdmaHcaMax != 5 || !reflect.DeepEqual(c.Shared.IfNames, []string{"ens8f0np0"}) {
		t.Errorf("c = %+v (legacy devices must become ifNames)", c)
	}
	if !a.NeedsRDMA() || got[1].NeedsRDMA() || !c.NeedsRDMA() {
		t.Errorf("NeedsRDMA wrong")
	}
}

func TestParseErrorsNameFieldValueAndFix(t *testing.T) {
	tests := []struct {
		name string
		data string
		want []string // substrings of the error
	}{
		{"empty", "", []string{"empty"}},
		{"no pools", `{"foo": 1}`, []string{"unknown field", "foo"}},
		{"syntax", `{"resourceList": [`, []string{"x.json"}},
		{"needVhostNet", `{"resourceList":[{"resourceName":"r","selectors":{"needVhostNet":true}}]}`, []string{"resourceList[0]", "selectors.needVhostNet", "not supported", "remove needVhostNet"}},
		{"missing name", `{"resourceList":[{"selectors":{"vendors":["15b3"]}}]}`, []string{"resourceName", "is required"}},
		{"bad name", `{"resourceList":[{"resourceName":"a/b","selectors":{"vendors":["15b3"]}}]}`, []string{"resourceName", `"a/b"`}},
		{"bad prefix", `{"resourceList":[{"resourcePrefix":"Example.COM","resourceName":"r","selectors":{"vendors":["15b3"]}}]}`, []string{"resourcePrefix", "DNS subdomain"}},
		{"no selectors", `{"resourceList":[{"resourceName":"r"}]}`, []string{"selectors", "is required"}},
		{"bad vendor", `{"resourceList":[{"resourceName":"r","selectors":{"vendors":["mellanox"]}}]}`, []string{"selectors.vendors", `"mellanox"`, "hexadecimal"}},
		{"bad pf range", `{"resourceList":[{"resourceName":"r","selectors":[{"pfNames":["ens1f0#3-1"]}]}]}`, []string{"selectors[0].pfNames", "backwards", "ens1f0#0-3,7"}},
		{"bad pci", `{"resourceList":[{"resourceName":"r","selectors":{"pciAddresses":["41:00.2"]}}]}`, []string{"pciAddresses", "0000:41:00.2"}},
		{"bad link type", `{"resourceList":[{"resourceName":"r","selectors":{"linkTypes":["roce"]}}]}`, []string{"linkTypes", `"roce"`, "ether"}},
		{"typo key", `{"resourceList":[{"resourceName":"r","selectors":{"pfname":["x"]}}]}`, []string{"unknown field", "pfname"}},
		{"wrong type", `{"resourceList":[{"resourceName":"r","selectors":{"isRdma":"yes"}}]}`, []string{"isRdma", "bool"}},
		{"accelerator", `{"resourceList":[{"resourceName":"r","deviceType":"accelerator","selectors":{"vendors":["15b3"]}}]}`, []string{"deviceType", "netDevice"}},
		{"no hca max", `{"configList":[{"resourceName":"s","selectors":{"ifNames":["p0"]}}]}`, []string{"rdmaHcaMax", "is required"}},
		{"zero hca max", `{"configList":[{"resourceName":"s","rdmaHcaMax":0,"selectors":{"ifNames":["p0"]}}]}`, []string{"rdmaHcaMax = 0"}},
		{"shared selects nothing", `{"configList":[{"resourceName":"s","rdmaHcaMax":3}]}`, []string{"selects nothing"}},
		{"bad yaml", "kind: ConfigMap\ndata: [\n", []string{"not valid JSON or YAML"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("x.json", []byte(tc.data))
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestMergeRefusesDuplicateResource(t *testing.T) {
	a, err := Parse("a.json", []byte(`{"configList":[{"resourceName":"x","rdmaHcaMax":3,"selectors":{"ifNames":["p0"]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse("b.json", []byte(`{"configList":[{"resourceName":"x","rdmaHcaMax":9,"selectors":{"ifNames":["p1"]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Merge(a, b); err == nil || !strings.Contains(err.Error(), "a.json") || !strings.Contains(err.Error(), "rdma/x") {
		t.Fatalf("Merge error = %v, want one naming the first definition and the resource", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"sriovdp-config.yaml", "sriovdp-config.json", "nicclusterpolicy.yaml", "rdma-shared-config.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"resourceList":[{"resourceName":"r","selectors":[{"pfNames":["a#1-2,5"]}]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		pools, err := Parse("fuzz", b)
		if err == nil && len(pools) == 0 {
			t.Fatal("no error and no pools")
		}
	})
}
