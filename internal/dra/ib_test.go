package dra

import (
	"fmt"
	"path/filepath"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

// TestDevicesInfiniBand: devices of IB pools carry the link layer, their
// node and port GUIDs (none while a VF's GUID is unset) and the port's PKey
// table; Ethernet devices carry none of the IB attributes.
func TestDevicesInfiniBand(t *testing.T) {
	root := filepath.Join(t.TempDir(), "sys")
	n, err := sysfsfixture.NewIBNode(root, sysfsfixture.IBNodeOptions{VFs: 2, VFGUID: func(i int) string {
		if i == 0 {
			return "02:00:00:00:00:00:00:01" // pre-assigned by an operator
		}
		return sysfsfixture.ZeroGUID
	}})
	if err != nil {
		t.Fatal(err)
	}
	// a node's RDMA netns mode serves either exclusive or shared pools:
	// the IB VF pool in exclusive mode, the shared IB port in shared mode;
	// the ether pools match nothing of the IB functions (linkTypes)
	exclusive := `{"resourceList":[{"resourcePrefix":"example.com","resourceName":"sriov_ib","selectors":[{"rootDevices":["0000:c1:00.0"],"linkTypes":["infiniband"],"isRdma":true}]},
	                               {"resourcePrefix":"example.com","resourceName":"sriov_eth","selectors":[{"linkTypes":["ether"],"isRdma":true}]}]}`
	shared := `{"configList":[{"resourceName":"rdma_shared_ib","rdmaHcaMax":16,"selectors":{"ifNames":["ibp193s0f1"],"linkTypes":["infiniband"]}},
	                          {"resourceName":"rdma_shared_eth","rdmaHcaMax":16,"selectors":{"ifNames":["ibp193s0f1","eno1"],"linkTypes":["ether"]}}]}`
	devs := append(build(t, root, "exclusive", exclusive), build(t, root, "shared", shared)...)
	byPCI := map[string]resourceapi.Device{}
	for _, d := range devs {
		byPCI[*d.Attributes[AttrMultusDeviceID].StringValue] = d
	}
	str := func(d resourceapi.Device, name resourceapi.QualifiedName) string {
		if v, ok := d.Attributes[name]; ok && v.StringValue != nil {
			return *v.StringValue
		}
		return "<none>"
	}
	for _, tc := range []struct {
		name                         string
		pci                          string
		linkLayer, node, port, pkeys string
	}{
		{name: "VF with a pre-assigned GUID", pci: n.Port0VFs[0], linkLayer: "infiniband", node: "02:00:00:00:00:00:00:01", port: "02:00:00:00:00:00:00:01", pkeys: "0xffff,0x8005"},
		{name: "fresh VF: GUID unset", pci: n.Port0VFs[1], linkLayer: "infiniband", node: "<none>", port: "<none>", pkeys: "0xffff,0x8005"},
		{name: "shared IB port", pci: n.Port1.BDF, linkLayer: "infiniband", node: "0c:42:a1:03:00:65:8e:82", port: "0c:42:a1:03:00:65:8e:82", pkeys: "0xffff,0x8005,0x8006"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := byPCI[tc.pci]
			if !ok {
				t.Fatalf("no device for %s; devices %v", tc.pci, names(devs))
			}
			got := fmt.Sprint(str(d, AttrLinkLayer), " ", str(d, AttrNodeGUID), " ", str(d, AttrPortGUID), " ", str(d, AttrPKeys))
			want := fmt.Sprint(tc.linkLayer, " ", tc.node, " ", tc.port, " ", tc.pkeys)
			if got != want {
				t.Errorf("linkLayer nodeGUID portGUID pkeys = %s, want %s", got, want)
			}
		})
	}
	// the linkTypes selector keeps IB functions out of the ether pool and
	// the management NIC (default route) out of every pool
	for pci, d := range byPCI {
		if str(d, AttrLinkLayer) != "infiniband" {
			t.Errorf("device %s (%s) has link layer %s", d.Name, pci, str(d, AttrLinkLayer))
		}
		if _, ok := d.Attributes[AttrPKeys]; !ok {
			t.Errorf("IB device %s has no pkeys", d.Name)
		}
	}
	if len(byPCI) != 3 {
		t.Errorf("devices %v, want the two IB VFs and the shared IB port", names(devs))
	}
}
