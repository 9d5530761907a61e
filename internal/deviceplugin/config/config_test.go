package config

import (
	"errors"
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
			f, err := ParseFile(tc.file, data)
			if err != nil {
				t.Fatal(err)
			}
			if len(f.Warnings) != 0 {
				t.Errorf("warnings on a clean config: %v", f.Warnings)
			}
			got := f.Pools
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
	    {"resourceName": "a", "selectors": {"vendors": ["15b3"], "devices": ["101e"], "drivers": ["mlx5_core"],
	      "pciAddresses": ["0000:41:00.2"], "pfNames": ["ens1f0#0-3,7"], "rootDevices": ["0000:41:00.0"], "linkTypes": ["ether"], "isRdma": true}},
	    {"resourcePrefix": "example.com", "resourceName": "b", "selectors": [{"pfNames": ["p0"]}, {"linkTypes": ["infiniband"]}]}
	  ],
	  "configList": [{"resourceName": "c", "rdmaHcaMax": 5, "selectors": {"ifNames": ["ens8f0np0"], "linkTypes": ["ether"]}}]
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
		t.Errorf("c = %+v", c)
	}
	if !a.NeedsRDMA() || got[1].NeedsRDMA() || !c.NeedsRDMA() {
		t.Errorf("NeedsRDMA wrong")
	}
}

// TestLiberalAsUpstream: what the upstream plugins' encoding/json accepts is
// accepted, with a warning naming the key or pool.
func TestLiberalAsUpstream(t *testing.T) {
	tests := []struct {
		name      string
		data      string
		resources []string // served pools
		skipped   []string // pools rdmanet does not serve
		warn      []string // substrings, each in some warning
		check     func(t *testing.T, f *File)
	}{
		{
			name:      "keys in another case are read (IsRdma, NeedVhostNet, PfNames, ResourceName)",
			data:      `{"ResourceList":[{"ResourceName":"r","Selectors":{"Vendors":["15b3"],"PfNames":["p0"],"IsRdma":true,"NeedVhostNet":false}}]}`,
			resources: []string{"intel.com/r"},
			warn:      []string{`ResourceList: read as "resourceList"`, `selectors.IsRdma: read as "isRdma"`, `selectors.NeedVhostNet: read as "needVhostNet"`, `selectors.PfNames: read as "pfNames"`},
			check: func(t *testing.T, f *File) {
				s := f.Pools[0].Selectors[0]
				if !s.IsRdma || s.PFNames[0].Name != "p0" || s.Vendors[0] != "15b3" {
					t.Errorf("selector = %+v", s)
				}
			},
		},
		{
			name:      "unknown and legacy keys are ignored with a warning (SelectorObj, kubeletRootDir, rootDevices in a shared selector, ifnames)",
			data:      `{"kubeletRootDir":"/var/lib/kubelet","resourceList":[{"resourceName":"r","SelectorObj":null,"selectors":{"vendors":["15b3"],"auxTypes":["sf"]}}],"configList":[{"resourceName":"s","rdmaHcaMax":3,"selectors":{"ifnames":["p1"],"rootDevices":["0000:41:00.0"]}}]}`,
			resources: []string{"intel.com/r", "rdma/s"},
			warn:      []string{"kubeletRootDir: was a key", "SelectorObj: is the SR-IOV device plugin's internal", "selectors.auxTypes: selects auxiliary devices", `selectors.ifnames: read as "ifNames"`, "selectors.rootDevices: is a selector of the SR-IOV device plugin, not of rdma-shared-dev-plugin"},
			check: func(t *testing.T, f *File) {
				if got := f.Pools[1].Shared.IfNames; !reflect.DeepEqual(got, []string{"p1"}) {
					t.Errorf("ifnames = %v", got)
				}
			},
		},
		{
			name:      "pools of kinds rdmanet does not serve are skipped, naming the pool",
			data:      `{"resourceList":[{"resourceName":"qat","deviceType":"accelerator","selectors":{"vendors":["8086"]}},{"resourceName":"sf","deviceType":"auxNetDevice","selectors":{"auxTypes":["sf"]}},{"resourceName":"dpdk","selectors":{"drivers":["vfio-pci"],"needVhostNet":true}},{"resourceName":"ddp","selectors":{"ddpProfiles":["GTPv1-C/U IPv4/IPv6 payload"]}},{"resourceName":"vdpa","selectors":{"vdpaType":"vhost"}},{"resourceName":"pkey","selectors":{"pKeys":["0x7fff"]}},{"resourceName":"acpi","selectors":{"acpiIndexes":["101"]}},{"resourceName":"rng","selectors":{"rootDevices":["0000:41:00.0#0-3"]}},{"resourceName":"rdma","selectors":{"vendors":["15b3"],"isRdma":true}}]}`,
			resources: []string{"intel.com/rdma"},
			skipped:   []string{"intel.com/qat", "intel.com/sf", "intel.com/dpdk", "intel.com/ddp", "intel.com/vdpa", "intel.com/pkey", "intel.com/acpi", "intel.com/rng"},
			warn:      []string{"resourceList[0] (intel.com/qat): deviceType: pool skipped", "(intel.com/dpdk): selectors.needVhostNet: pool skipped", "(intel.com/rng): selectors.rootDevices: pool skipped"},
		},
		{
			name:      "a pool whose selectors upstream cannot decode is dropped as upstream drops it",
			data:      `{"resourceList":[{"resourceName":"bad","selectors":{"isRdma":"yes"}},{"resourceName":"empty","selectors":[]},{"resourceName":"ok","selectors":{"vendors":["15b3"]}}]}`,
			resources: []string{"intel.com/ok"},
			warn:      []string{"(intel.com/bad): selectors: pool dropped, as the SR-IOV device plugin drops it: cannot decode the selectors: isRdma must be a boolean", "(intel.com/empty): selectors: pool dropped", "the selector list is empty"},
		},
		{
			name:      "selector values are kept verbatim, as upstream compares them, with a warning when they never match",
			data:      `{"resourceList":[{"resourceName":"r","selectors":{"vendors":["0x15B3"],"pciAddresses":["41:00.2"],"linkTypes":["eth"],"pfNames":["p0#3-1,5","p0#7","p1#2,x,4"],"rootDevices":["0000:AF:00.0"]}}]}`,
			resources: []string{"intel.com/r"},
			warn:      []string{`vendors = "0x15B3": never matches`, `write "15b3"`, `pciAddresses = "41:00.2": never matches`, `"0000:41:00.2"`, `linkTypes = "eth": never matches`, `write "ether"`, `"p0#3-1,5": VF range "3-1" runs backwards`, `pfNames = "p0#7": ignored: "p0#3-1,5" names the same PF first`, `"p1#2,x,4": VF index "x" is not a number`},
			check: func(t *testing.T, f *File) {
				s := f.Pools[0].Selectors[0]
				want := SriovSelector{Vendors: []string{"0x15B3"}, PCIAddresses: []string{"41:00.2"}, LinkTypes: []string{"eth"},
					PFNames: []PFName{{Name: "p0", VFs: []int{5}}, {Name: "p1", VFs: []int{2}}}, RootDevices: []string{"0000:af:00.0"}}
				if !reflect.DeepEqual(s, want) {
					t.Errorf("selector\n got %+v\nwant %+v", s, want)
				}
			},
		},
		{
			name:      "legacy shared devices become ifNames",
			data:      `{"configList":[{"resourceName":"s","rdmaHcaMax":3,"devices":["ens8f0np0"]}]}`,
			resources: []string{"rdma/s"},
			warn:      []string{`devices = ["ens8f0np0"]: read as "selectors": {"ifNames": [...]}`},
		},
		{
			name:      "a ConfigMap key spelled in another case is found",
			data:      "kind: ConfigMap\ndata:\n  config.json: '{\"ResourceList\":[{\"resourceName\":\"r\",\"selectors\":{\"vendors\":[\"15b3\"]}}]}'\n",
			resources: []string{"intel.com/r"},
			warn:      []string{`ResourceList: read as "resourceList"`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseFile("x.json", []byte(tc.data))
			if err != nil {
				t.Fatal(err)
			}
			var got, skipped []string
			for _, p := range f.Pools {
				got = append(got, p.Resource())
			}
			for _, s := range f.Skipped {
				skipped = append(skipped, s.Resource)
			}
			if !reflect.DeepEqual(got, tc.resources) || !reflect.DeepEqual(skipped, tc.skipped) {
				t.Errorf("pools = %v, skipped = %v; want %v, %v", got, skipped, tc.resources, tc.skipped)
			}
			var all []string
			for _, w := range f.Warnings {
				all = append(all, w.String())
			}
			for _, w := range tc.warn {
				if !strings.Contains(strings.Join(all, "\n"), w) {
					t.Errorf("no warning has %q; warnings:\n%s", w, strings.Join(all, "\n"))
				}
			}
			if tc.check != nil {
				tc.check(t, f)
			}
		})
	}
}

func TestParseErrorsNameFieldValueAndFix(t *testing.T) {
	tests := []struct {
		name string
		data string
		want []string // substrings of the error
	}{
		{"empty", "", []string{"empty"}},
		{"no pools", `{"foo": 1}`, []string{"holds no resourceList or configList entries", `"foo"`}},
		{"syntax", `{"resourceList": [`, []string{"x.json", "not valid JSON"}},
		{"wrong type at the top refuses the file, as upstream", `{"resourceList":{"resourceName":"r"}}`, []string{"resourceList", "must be a list"}},
		{"wrong type in a pool refuses the file, as upstream", `{"resourceList":[{"resourceName":5,"selectors":{}}]}`, []string{"resourceList.resourceName", "must be a string"}},
		{"unknown deviceType (upstream refuses)", `{"resourceList":[{"resourceName":"r","deviceType":"NetDevice","selectors":{}}]}`, []string{"deviceType", `"NetDevice"`, "case-sensitive"}},
		{"missing name", `{"resourceList":[{"selectors":{"vendors":["15b3"]}}]}`, []string{"resourceName", "is required"}},
		{"dot in the name (upstream's tests refuse it)", `{"resourceList":[{"resourceName":"junk.net.0","selectors":{"vendors":["15b3"]}}]}`, []string{"resourceName", `"junk.net.0"`, "only letters, digits, '_' and '-'", `"junk_net_0"`}},
		{"name kubelet refuses", `{"resourceList":[{"resourceName":"_r","selectors":{"vendors":["15b3"]}}]}`, []string{`"_r"`, "kubelet refuses"}},
		{"dash in a shared name (rdma-shared-dev-plugin refuses)", `{"configList":[{"resourceName":"a-b","rdmaHcaMax":3,"selectors":{"ifNames":["p0"]}}]}`, []string{`"a-b"`, "rdma-shared-dev-plugin refuses it"}},
		{"bad prefix", `{"resourceList":[{"resourcePrefix":"Example.COM","resourceName":"r","selectors":{"vendors":["15b3"]}}]}`, []string{"resourcePrefix", "DNS subdomain", "kubelet refuses"}},
		{"duplicate (upstream refuses)", `{"resourceList":[{"resourceName":"d","selectors":{}},{"resourceName":"d","selectors":{}}]}`, []string{"resourceList[1]", "already defined by", "resourceList[0]"}},
		{"duplicate even in a pool rdmanet skips", `{"resourceList":[{"resourceName":"d","selectors":{}},{"resourceName":"d","deviceType":"accelerator","selectors":{}}]}`, []string{"already defined"}},
		{"isRdma with vdpaType (upstream refuses)", `{"resourceList":[{"resourceName":"r","selectors":{"isRdma":true,"vdpaType":"virtio"}}]}`, []string{"isRdma and vdpaType", "mutually exclusive"}},
		{"auxNetDevice without auxTypes (upstream refuses)", `{"resourceList":[{"resourceName":"r","deviceType":"auxNetDevice","selectors":{}}]}`, []string{"auxTypes", `"sf"`}},
		{"no selectors (upstream crashes)", `{"resourceList":[{"resourceName":"r"}]}`, []string{"selectors", "is required", "crashes"}},
		{"null selector group (upstream crashes)", `{"resourceList":[{"resourceName":"r","selectors":[{},null]}]}`, []string{"selectors[1]", "null"}},
		{"every pool dropped (upstream exits)", `{"resourceList":[{"resourceName":"r","selectors":"x"}]}`, []string{"no pool is left", "intel.com/r", "no resource configuration"}},
		{"only pools rdmanet does not serve (Parse only)", `{"resourceList":[{"resourceName":"r","deviceType":"accelerator","selectors":{"vendors":["8086"]}}]}`, []string{"holds no pool rdmanet serves", "intel.com/r", "accelerator"}},
		{"no hca max", `{"configList":[{"resourceName":"s","selectors":{"ifNames":["p0"]}}]}`, []string{"rdmaHcaMax = missing", "zero slots"}},
		{"zero hca max", `{"configList":[{"resourceName":"s","rdmaHcaMax":0,"selectors":{"ifNames":["p0"]}}]}`, []string{"rdmaHcaMax = 0", "zero slots"}},
		{"negative hca max (upstream refuses)", `{"configList":[{"resourceName":"s","rdmaHcaMax":-1,"selectors":{"ifNames":["p0"]}}]}`, []string{"rdmaHcaMax = -1", "negative"}},
		{"negative periodicUpdateInterval (upstream refuses)", `{"periodicUpdateInterval":-5,"configList":[{"resourceName":"s","rdmaHcaMax":1,"selectors":{"ifNames":["p0"]}}]}`, []string{"periodicUpdateInterval = -5"}},
		{"shared selects nothing", `{"configList":[{"resourceName":"s","rdmaHcaMax":3}]}`, []string{"selects nothing"}},
		{"shared devices next to selectors (upstream refuses)", `{"configList":[{"resourceName":"s","rdmaHcaMax":3,"devices":["p0"],"selectors":{"ifNames":["p1"]}}]}`, []string{"devices", "next to \"selectors\""}},
		{"shared duplicate name under another prefix (upstream refuses)", `{"configList":[{"resourceName":"s","rdmaHcaMax":3,"devices":["p0"]},{"resourcePrefix":"example.com","resourceName":"s","rdmaHcaMax":3,"devices":["p1"]}]}`, []string{"configList[1]", `"s"`, "already used"}},
		{"shared selectors as a list (upstream's decoder refuses)", `{"configList":[{"resourceName":"s","rdmaHcaMax":3,"selectors":[{"ifNames":["p0"]}]}]}`, []string{"selectors", "must be a"}},
		{"bad yaml", "kind: ConfigMap\ndata: [\n", []string{"not valid JSON or YAML"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("x.json", []byte(tc.data))
			if err == nil {
				t.Fatal("want an error")
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Errorf("error %T is not a *config.Error", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestParsePFNameAsUpstreamMatches(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    PFName
		problem string
	}{
		{name: "whole PF", in: "ens1f0", want: PFName{Name: "ens1f0"}},
		{name: "ranges and indexes", in: "ens1f0#0-3,7", want: PFName{Name: "ens1f0", VFs: []int{0, 1, 2, 3, 7}}},
		{name: "backwards range selects nothing, the rest still counts", in: "p#3-1,5", want: PFName{Name: "p", VFs: []int{5}}, problem: "runs backwards"},
		{name: "reading stops at the first bad item", in: "p#2,x,4", want: PFName{Name: "p", VFs: []int{2}}, problem: `"x" is not a number`},
		{name: "empty list selects nothing", in: "p#", want: PFName{Name: "p", VFs: []int{}}, problem: `"" is not a number`},
		{name: "two # select nothing", in: "p#1#2", want: PFName{Name: "p", VFs: []int{}}, problem: "only one '#'"},
		{name: "range past the SR-IOV limit is clipped", in: "p#65534-70000", want: PFName{Name: "p", VFs: []int{65534, 65535}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, problem := ParsePFName(tc.in)
			if !reflect.DeepEqual(got, tc.want) || !strings.Contains(problem, tc.problem) || (tc.problem == "" && problem != "") {
				t.Fatalf("ParsePFName(%q) = %+v, %q; want %+v, %q", tc.in, got, problem, tc.want, tc.problem)
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
		file, err := ParseFile("fuzz", b)
		if err == nil && len(file.Pools)+len(file.Skipped) == 0 {
			t.Fatal("no error and no pools")
		}
		pools, err := Parse("fuzz", b)
		if err == nil && len(pools) == 0 {
			t.Fatal("Parse: no error and no pools")
		}
	})
}

func TestPCIAddressesOfLongDomainsNeverWarn(t *testing.T) {
	tests := []struct {
		name string
		addr string
		warn bool
	}{
		{name: "four-digit domain", addr: "0000:41:00.2"},
		{name: "Intel VMD five-digit domain", addr: "10000:01:00.2"},
		{name: "Hyper-V domain", addr: "7870:00:00.0"},
		{name: "no domain", addr: "41:00.2", warn: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseFile("x.json", []byte(`{"resourceList":[{"resourceName":"r","selectors":{"pciAddresses":["`+tc.addr+`"],"rootDevices":["`+tc.addr+`"]}}]}`))
			if err != nil {
				t.Fatal(err)
			}
			if got := len(f.Warnings) > 0; got != tc.warn {
				t.Fatalf("pciAddresses/rootDevices %q: warnings %v, want warning %v", tc.addr, f.Warnings, tc.warn)
			}
		})
	}
}

func TestWarningsNameTheirPool(t *testing.T) {
	f, err := ParseFile("x.json", []byte(`{"kubeletRootDir":"/k","resourceList":[{"resourceName":"qat","deviceType":"accelerator","selectors":{"vendors":["8086"]}},{"resourceName":"r","selectors":{"IsRdma":true,"vendors":["15b3"]}}],"configList":[{"resourceName":"s","rdmaHcaMax":3,"selectors":{"ifnames":["p1"]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, w := range f.Warnings {
		got[w.Field] = w.Pool
	}
	want := map[string]string{"kubeletRootDir": "", "deviceType": "intel.com/qat", "selectors.IsRdma": "intel.com/r", "selectors.ifnames": "rdma/s"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("warning field -> pool = %v, want %v", got, want)
	}
}
