package dra

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/rdmanet/rdmanet/internal/deviceplugin"
	"github.com/rdmanet/rdmanet/internal/deviceplugin/config"
	"github.com/rdmanet/rdmanet/internal/inventory"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

// Pool configurations of the seeds (examples/agent): the exclusive RoCE VF
// pool, the shared HCA pool, and an InfiniBand VF pool on the other socket.
const (
	cfgExclusive = `{"resourceList":[{"resourcePrefix":"example.com","resourceName":"sriov_rdma","selectors":[{"vendors":["15b3"],"pfNames":["enp65s0f0np0"],"isRdma":true}]}]}`
	cfgIB        = `{"resourceList":[{"resourcePrefix":"example.com","resourceName":"sriov_ib","selectors":[{"rootDevices":["0000:c1:00.0"],"isRdma":true}]}]}`
	cfgShared    = `{"configList":[{"resourceName":"rdma_shared_device_eth","rdmaHcaMax":63,"selectors":{"ifNames":["ens8f0np0"]}}]}`
	cfgAll       = `{"resourceList":[` +
		`{"resourcePrefix":"example.com","resourceName":"sriov_rdma","selectors":[{"vendors":["15b3"],"pfNames":["enp65s0f0np0"],"isRdma":true}]},` +
		`{"resourcePrefix":"example.com","resourceName":"sriov_ib","selectors":[{"rootDevices":["0000:c1:00.0"],"isRdma":true}]}],` +
		`"configList":[{"resourceName":"rdma_shared_device_eth","rdmaHcaMax":63,"selectors":{"ifNames":["ens8f0np0"]}}]}`
)

// fixture is the standard two-socket node (sysfsfixture.NewStandard) with
// GPUs beside the NICs and firmware versions on the PFs' RDMA devices.
func fixture(t *testing.T) *sysfsfixture.Standard {
	t.Helper()
	s, err := sysfsfixture.NewStandard(t.TempDir(), sysfsfixture.StandardOptions{RoCEVFs: 4, IBVFs: 2, GPUs: 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, ib := range []string{s.RoCE.RDMADev, s.Shared.RDMADev} {
		if err := os.WriteFile(filepath.Join(s.Root, "class/infiniband", ib, "fw_ver"), []byte("22.39.1002\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func build(t *testing.T, root, netns, cfg string) []resourceapi.Device {
	t.Helper()
	specs, err := config.Parse("pools.json", []byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	node, err := inventory.Discover(inventory.Options{SysfsRoot: root, DefaultRouteLinks: []string{"eno1"}, NetnsModeFlag: netns})
	if err != nil {
		t.Fatal(err)
	}
	pools, err := deviceplugin.Build(node, specs)
	if err != nil {
		t.Fatal(err)
	}
	devs, problems := Devices(node, pools, NewSysfsTopology(root))
	if problems != nil {
		t.Fatal(problems)
	}
	return devs
}

func byName(devs []resourceapi.Device) map[string]resourceapi.Device {
	m := map[string]resourceapi.Device{}
	for _, d := range devs {
		m[d.Name] = d
	}
	return m
}

func names(devs []resourceapi.Device) []string {
	var out []string
	for _, d := range devs {
		out = append(out, d.Name)
	}
	return out
}

// attrs renders a device's attributes as name=value strings for comparison.
func attrs(d resourceapi.Device) map[string]string {
	out := map[string]string{}
	for k, v := range d.Attributes {
		switch {
		case v.StringValue != nil:
			out[string(k)] = *v.StringValue
		case v.IntValue != nil:
			out[string(k)] = itoa(*v.IntValue)
		case v.BoolValue != nil:
			out[string(k)] = map[bool]string{true: "true", false: "false"}[*v.BoolValue]
		default:
			out[string(k)] = "?"
		}
	}
	return out
}

func itoa(i int64) string {
	if i < 0 {
		return "-" + itoa(-i)
	}
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

func TestDevices(t *testing.T) {
	vf0 := sysfsfixture.VFBDF("0000:41:00.0", 0) // 0000:41:00.2
	ibvf1 := sysfsfixture.VFBDF("0000:c1:00.0", 1)
	tests := []struct {
		name   string
		netns  string
		cfg    string
		change func(t *testing.T, s *sysfsfixture.Standard)
		// names: the devices, in order; attrs: expected attributes of
		// some devices (every listed one, exactly; absent attributes
		// as "<none>"); tainted: devices with the unhealthy taint.
		names   []string
		attrs   map[string]map[string]string
		tainted []string
	}{
		{
			name: "exclusive RoCE pool: one device per VF, NUMA 0 under pci0000:40", netns: "exclusive", cfg: cfgExclusive,
			names: []string{"vf-0000-41-00-2", "vf-0000-41-00-3", "vf-0000-41-00-4", "vf-0000-41-00-5"},
			attrs: map[string]map[string]string{"vf-0000-41-00-2": {
				"resource.kubernetes.io/pcieRoot": "pci0000:40",
				"resource.kubernetes.io/numaNode": "0",
				"resource.kubernetes.io/pciBusID": vf0,
				"kind":                            "exclusive",
				"linkLayer":                       "ethernet",
				"pfName":                          "enp65s0f0np0",
				"pfPciAddress":                    "0000:41:00.0",
				"vfIndex":                         "0",
				"rdmaDevice":                      "mlx5_4",
				"rdmaNetnsMode":                   "exclusive",
				"driver":                          "mlx5_core",
				"firmware":                        "22.39.1002",
				"pciVendor":                       "15b3",
				"pciDevice":                       "101e",
				"k8s.cni.cncf.io/deviceID":        vf0,
				"k8s.cni.cncf.io/resourceName":    "example.com/sriov_rdma",
			}},
		},
		{
			name: "InfiniBand VF pool on the other socket: NUMA 1 under pci0000:c0, no firmware in sysfs", netns: "exclusive", cfg: cfgIB,
			names: []string{"vf-0000-c1-00-2", "vf-0000-c1-00-3"},
			attrs: map[string]map[string]string{"vf-0000-c1-00-3": {
				"resource.kubernetes.io/pcieRoot": "pci0000:c0",
				"resource.kubernetes.io/numaNode": "1",
				"resource.kubernetes.io/pciBusID": ibvf1,
				"kind":                            "exclusive",
				"linkLayer":                       "infiniband",
				"pfName":                          "ibp193s0f0",
				"pfPciAddress":                    "0000:c1:00.0",
				"vfIndex":                         "1",
				"rdmaDevice":                      "mlx5_9",
				"nodeGUID":                        "b8:59:9f:03:00:09:00:09", // IB devices carry their GUIDs
				"portGUID":                        "b8:59:9f:03:00:09:00:09",
				"rdmaNetnsMode":                   "exclusive",
				"driver":                          "mlx5_core",
				"pciVendor":                       "15b3",
				"pciDevice":                       "101e",
				"k8s.cni.cncf.io/deviceID":        ibvf1,
				"k8s.cni.cncf.io/resourceName":    "example.com/sriov_ib",
				"firmware":                        "<none>",
			}},
		},
		{
			name: "shared pool: one device per HCA, NUMA 1 under pci0000:80", netns: "shared", cfg: cfgShared,
			names: []string{"hca-0000-81-00-0"},
			attrs: map[string]map[string]string{"hca-0000-81-00-0": {
				"resource.kubernetes.io/pcieRoot": "pci0000:80",
				"resource.kubernetes.io/numaNode": "1",
				"resource.kubernetes.io/pciBusID": "0000:81:00.0",
				"kind":                            "shared",
				"linkLayer":                       "ethernet",
				"pfName":                          "ens8f0np0",
				"pfPciAddress":                    "0000:81:00.0",
				"vfIndex":                         "<none>",
				"rdmaDevice":                      "mlx5_2",
				"rdmaNetnsMode":                   "shared",
				"driver":                          "mlx5_core",
				"firmware":                        "22.39.1002",
				"pciVendor":                       "15b3",
				"pciDevice":                       "101d",
				"k8s.cni.cncf.io/deviceID":        "0000:81:00.0",
				"k8s.cni.cncf.io/resourceName":    "rdma/rdma_shared_device_eth",
			}},
		},
		{
			name: "netns mode unknown: every pool, in configuration order", cfg: cfgAll,
			names: []string{"vf-0000-41-00-2", "vf-0000-41-00-3", "vf-0000-41-00-4", "vf-0000-41-00-5", "vf-0000-c1-00-2", "vf-0000-c1-00-3", "hca-0000-81-00-0"},
			attrs: map[string]map[string]string{
				"vf-0000-41-00-2":  {"rdmaNetnsMode": "unknown", "resource.kubernetes.io/numaNode": "0", "resource.kubernetes.io/pcieRoot": "pci0000:40"},
				"vf-0000-c1-00-2":  {"rdmaNetnsMode": "unknown", "resource.kubernetes.io/numaNode": "1", "resource.kubernetes.io/pcieRoot": "pci0000:c0"},
				"hca-0000-81-00-0": {"rdmaNetnsMode": "unknown", "resource.kubernetes.io/numaNode": "1", "resource.kubernetes.io/pcieRoot": "pci0000:80"},
			},
		},
		{
			name: "netns mode shared: the exclusive pools are not advertised, so not published", netns: "shared", cfg: cfgAll,
			names: []string{"hca-0000-81-00-0"},
		},
		{
			name: "netns mode exclusive: the shared pool is not published", netns: "exclusive", cfg: cfgAll,
			names: []string{"vf-0000-41-00-2", "vf-0000-41-00-3", "vf-0000-41-00-4", "vf-0000-41-00-5", "vf-0000-c1-00-2", "vf-0000-c1-00-3"},
		},
		{
			name: "VF whose RDMA port is DOWN is tainted, the others not", netns: "exclusive", cfg: cfgExclusive,
			change: func(t *testing.T, s *sysfsfixture.Standard) {
				if err := s.SetPortState(s.RDMAByBD[sysfsfixture.VFBDF(s.RoCE.BDF, 1)], "1: DOWN"); err != nil {
					t.Fatal(err)
				}
			},
			names:   []string{"vf-0000-41-00-2", "vf-0000-41-00-3", "vf-0000-41-00-4", "vf-0000-41-00-5"},
			tainted: []string{"vf-0000-41-00-3"},
		},
		{
			name: "PF link down: every VF tainted", netns: "exclusive", cfg: cfgExclusive,
			change: func(t *testing.T, s *sysfsfixture.Standard) {
				if err := s.SetOperState(s.RoCE.Netdev, "down"); err != nil {
					t.Fatal(err)
				}
			},
			names:   []string{"vf-0000-41-00-2", "vf-0000-41-00-3", "vf-0000-41-00-4", "vf-0000-41-00-5"},
			tainted: []string{"vf-0000-41-00-2", "vf-0000-41-00-3", "vf-0000-41-00-4", "vf-0000-41-00-5"},
		},
		{
			name: "shared HCA port down: the HCA is tainted", netns: "shared", cfg: cfgShared,
			change: func(t *testing.T, s *sysfsfixture.Standard) {
				if err := s.SetPortState(s.Shared.RDMADev, "1: DOWN"); err != nil {
					t.Fatal(err)
				}
			},
			names:   []string{"hca-0000-81-00-0"},
			tainted: []string{"hca-0000-81-00-0"},
		},
		{
			name: "VF gone (sriov_numvfs shrank): its device is gone", netns: "exclusive", cfg: cfgExclusive,
			change: func(t *testing.T, s *sysfsfixture.Standard) {
				if err := s.SetNumVFs(s.RoCE, 4, 2); err != nil {
					t.Fatal(err)
				}
			},
			names: []string{"vf-0000-41-00-2", "vf-0000-41-00-3"},
		},
		{
			name: "NIC without NUMA affinity (numa_node -1) publishes no numaNode", netns: "exclusive",
			cfg: `{"resourceList":[{"resourceName":"nonuma","selectors":[{"pciAddresses":["0000:a1:00.0"]}]}]}`,
			change: func(t *testing.T, s *sysfsfixture.Standard) {
				if err := s.AddFunction(sysfsfixture.Function{BDF: "0000:a1:00.0", Vendor: sysfsfixture.VendorMellanox, Device: sysfsfixture.DeviceCX6Dx,
					Driver: "mlx5_core", NUMA: -1, PCIRoot: "pci0000:a0", Netdev: "ens9f0np0", RDMADev: "mlx5_50"}); err != nil {
					t.Fatal(err)
				}
			},
			names: []string{"pf-0000-a1-00-0"},
			attrs: map[string]map[string]string{"pf-0000-a1-00-0": {
				"resource.kubernetes.io/numaNode": "<none>", "resource.kubernetes.io/pcieRoot": "pci0000:a0",
				"pfName": "ens9f0np0", "pfPciAddress": "0000:a1:00.0", "vfIndex": "<none>",
				"k8s.cni.cncf.io/resourceName": "intel.com/nonuma",
			}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := fixture(t)
			if tc.change != nil {
				tc.change(t, s)
			}
			devs := build(t, s.Root, tc.netns, tc.cfg)
			if got := strings.Join(names(devs), " "); got != strings.Join(tc.names, " ") {
				t.Fatalf("devices %s, want %s", got, strings.Join(tc.names, " "))
			}
			m := byName(devs)
			for dev, want := range tc.attrs {
				got := attrs(m[dev])
				for k, v := range want {
					g, ok := got[k]
					if !ok {
						g = "<none>"
					}
					if g != v {
						t.Errorf("%s: attribute %s = %q, want %q", dev, k, g, v)
					}
				}
				if len(want) >= 15 && len(got) != countPresent(want) {
					t.Errorf("%s: attributes %v, want exactly %v", dev, got, want)
				}
			}
			tainted := map[string]bool{}
			for _, n := range tc.tainted {
				tainted[n] = true
			}
			for _, d := range devs {
				has := len(d.Taints) == 1 && d.Taints[0].Key == TaintUnhealthy && d.Taints[0].Effect == resourceapi.DeviceTaintEffectNoSchedule
				if has != tainted[d.Name] || (!tainted[d.Name] && len(d.Taints) != 0) {
					t.Errorf("%s: taints %+v, want unhealthy taint %v", d.Name, d.Taints, tainted[d.Name])
				}
			}
		})
	}
}

func countPresent(want map[string]string) int {
	n := 0
	for _, v := range want {
		if v != "<none>" {
			n++
		}
	}
	return n
}

// TestDevicesAPIRules: every device name is a DNS label, every attribute
// name a valid qualified name (C identifier of at most 32 characters, or
// domain/identifier), attributes and capacities together at most 32; a
// shared device takes rdmaHcaMax allocations of one slot each.
func TestDevicesAPIRules(t *testing.T) {
	s := fixture(t)
	devs := build(t, s.Root, "", cfgAll)
	if len(devs) != 7 {
		t.Fatalf("%d devices, want 7", len(devs))
	}
	for _, d := range devs {
		if errs := validation.IsDNS1123Label(d.Name); len(errs) > 0 {
			t.Errorf("device name %q: %v", d.Name, errs)
		}
		if n := len(d.Attributes) + len(d.Capacity); n > resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice {
			t.Errorf("%s: %d attributes and capacities, the API allows %d", d.Name, n, resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice)
		}
		for k := range d.Attributes {
			dom, id, ok := strings.Cut(string(k), "/")
			if !ok {
				id, dom = dom, ""
			}
			if dom != "" && len(validation.IsDNS1123Subdomain(dom)) > 0 {
				t.Errorf("%s: attribute %s: bad domain", d.Name, k)
			}
			if len(id) > 32 || len(validation.IsCIdentifier(id)) > 0 {
				t.Errorf("%s: attribute %s: not a C identifier of at most 32 characters", d.Name, k)
			}
		}
	}
	hca := byName(devs)["hca-0000-81-00-0"]
	if hca.AllowMultipleAllocations == nil || !*hca.AllowMultipleAllocations {
		t.Fatalf("shared device: allowMultipleAllocations %v, want true", hca.AllowMultipleAllocations)
	}
	c, ok := hca.Capacity[CapacitySlots]
	if !ok || c.Value.Value() != 63 || c.RequestPolicy == nil || c.RequestPolicy.Default.Value() != 1 ||
		len(c.RequestPolicy.ValidValues) != 1 || c.RequestPolicy.ValidValues[0].Value() != 1 {
		t.Fatalf("shared device capacity %+v, want slots=63 consumed one at a time", hca.Capacity)
	}
	for _, d := range devs {
		if d.Name != hca.Name && (d.AllowMultipleAllocations != nil || len(d.Capacity) > 0) {
			t.Errorf("exclusive device %s: allowMultipleAllocations %v, capacity %v: want neither", d.Name, d.AllowMultipleAllocations, d.Capacity)
		}
	}
}

// TestPCIeRootMatchesGPUs: the standard helper gives the GPUs beside a NIC
// (sysfsfixture.StandardGPUs) the NIC's pcieRoot, so a claim's
// matchAttribute on resource.kubernetes.io/pcieRoot pairs them.
func TestPCIeRootMatchesGPUs(t *testing.T) {
	s := fixture(t)
	topo := NewSysfsTopology(s.Root)
	devs := byName(build(t, s.Root, "", cfgAll))
	want := map[string]string{ // GPU -> device under the same root
		"0000:42:00.0": "vf-0000-41-00-2",
		"0000:43:00.0": "vf-0000-41-00-2",
		"0000:82:00.0": "hca-0000-81-00-0",
		"0000:c2:00.0": "vf-0000-c1-00-2",
	}
	if len(s.GPUs) != len(want) {
		t.Fatalf("fixture GPUs %v", s.GPUs)
	}
	for _, g := range s.GPUs {
		root, err := topo.PCIeRoot(g.BDF)
		if err != nil {
			t.Fatal(err)
		}
		nic := attrs(devs[want[g.BDF]])["resource.kubernetes.io/pcieRoot"]
		if root != nic || root != g.PCIRoot {
			t.Errorf("GPU %s: pcieRoot %q, fixture root %q, NIC %s pcieRoot %q", g.BDF, root, g.PCIRoot, want[g.BDF], nic)
		}
	}
}

// TestDevicesRootUnresolvable: a device whose PCIe root cannot be
// determined (its bus/pci/devices link gone) is published without the
// pcieRoot attribute, with a problem naming the pool, the device and the
// attribute; the other devices keep theirs.
func TestDevicesRootUnresolvable(t *testing.T) {
	s := fixture(t)
	specs, err := config.Parse("pools.json", []byte(cfgExclusive))
	if err != nil {
		t.Fatal(err)
	}
	node, err := inventory.Discover(inventory.Options{SysfsRoot: s.Root, NetnsModeFlag: "exclusive"})
	if err != nil {
		t.Fatal(err)
	}
	pools, err := deviceplugin.Build(node, specs)
	if err != nil {
		t.Fatal(err)
	}
	vf := sysfsfixture.VFBDF(s.RoCE.BDF, 2)
	if err := os.Remove(filepath.Join(s.Root, "bus/pci/devices", vf)); err != nil {
		t.Fatal(err)
	}
	devs, problems := Devices(node, pools, NewSysfsTopology(s.Root))
	if len(problems) != 1 {
		t.Fatalf("problems = %v, want one for %s", problems, vf)
	}
	for _, w := range []string{"example.com/sriov_rdma", vf, "resource.kubernetes.io/pcieRoot", s.Root} {
		if !strings.Contains(problems[0].Error(), w) {
			t.Errorf("problem %q does not name %s", problems[0], w)
		}
	}
	rooted := 0
	for _, d := range devs {
		_, has := d.Attributes[AttrPCIeRoot]
		if d.Name == DeviceName("vf", vf) {
			if has {
				t.Errorf("%s published with a pcieRoot", d.Name)
			}
			continue
		}
		if !has {
			t.Errorf("%s lost its pcieRoot", d.Name)
		}
		rooted++
	}
	if rooted == 0 || rooted != len(devs)-1 {
		t.Errorf("%d of %d devices have a pcieRoot, want all but %s", rooted, len(devs), vf)
	}
}

func TestSlices(t *testing.T) {
	mk := func(n int) []resourceapi.Device {
		out := make([]resourceapi.Device, n)
		for i := range out {
			out[i].Name = "d" + itoa(int64(i))
		}
		return out
	}
	tests := []struct {
		name    string
		devices int
		want    []int
	}{
		{"no devices: one empty slice (the driver runs, has nothing)", 0, []int{0}},
		{"one", 1, []int{1}},
		{"exactly one slice full", MaxDevicesPerSlice, []int{MaxDevicesPerSlice}},
		{"130 VFs", 130, []int{64, 64, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := mk(tc.devices)
			got := Slices(in)
			var sizes []int
			var order []string
			for _, s := range got {
				sizes = append(sizes, len(s))
				order = append(order, names(s)...)
			}
			if itoas(sizes) != itoas(tc.want) {
				t.Fatalf("slice sizes %v, want %v", sizes, tc.want)
			}
			if strings.Join(order, ",") != strings.Join(names(in), ",") {
				t.Fatalf("order changed: %v", order)
			}
		})
	}
}

func itoas(v []int) string {
	var s []string
	for _, i := range v {
		s = append(s, itoa(int64(i)))
	}
	return strings.Join(s, ",")
}

func TestDeviceName(t *testing.T) {
	tests := []struct{ name, prefix, bdf, want string }{
		{"VF", "vf", "0000:41:00.2", "vf-0000-41-00-2"},
		{"upper-case hex is lowered", "vf", "0000:C1:0A.7", "vf-0000-c1-0a-7"},
		{"HCA", "hca", "0000:81:00.0", "hca-0000-81-00-0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := DeviceName(tc.prefix, tc.bdf); got != tc.want {
				t.Fatalf("DeviceName(%q, %q) = %q, want %q", tc.prefix, tc.bdf, got, tc.want)
			}
		})
	}
}
