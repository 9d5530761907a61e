package sysfsfixture

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
)

// SF is an mlx5 sub-function: a slice of a PF with its own netdev and RDMA
// device, an auxiliary device below the PF's PCI function.
type SF struct {
	// Index is the auxiliary device's ID: the device is mlx5_core.sf.<Index>.
	Index int
	// SFNum is the number given to `devlink port add ... sfnum N`, in the
	// device's sfnum attribute and in the netdev's udev name.
	SFNum int
	// Netdev defaults to the PF's netdev name without its np<N> suffix,
	// followed by s<SFNum>: enp59s0f0np0 -> enp59s0f0s1.
	Netdev string
	// RDMADev defaults to the node's next mlx5_N; NoRDMA turns it off.
	RDMADev string
	NoRDMA  bool
}

// Device is the SF's auxiliary device name, mlx5_core.sf.<Index>.
func (s SF) Device() string { return "mlx5_core.sf." + strconv.Itoa(s.Index) }

var physPortSuffix = regexp.MustCompile(`np[0-9]+$`)

// AddSF writes sub-function sf of pf (already written) the way mlx5 lays
// out an active SF:
//
//	devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/mlx5_core.sf.2/    auxiliary device (sfnum, driver mlx5_core.sf)
//	    net/enp59s0f0s1/  infiniband/mlx5_2/  infiniband_verbs/uverbsN/
//	bus/auxiliary/devices/mlx5_core.sf.2 -> ../../../devices/.../0000:3b:00.0/mlx5_core.sf.2
//	class/net/enp59s0f0s1 -> ../../devices/.../0000:3b:00.0/mlx5_core.sf.2/net/enp59s0f0s1
//	class/net/enp59s0f0s1/device -> ../../../mlx5_core.sf.2
//
// It returns sf with its defaults filled in.
func (n *Node) AddSF(pf Function, sf SF) (SF, error) {
	pfDir := n.Devices[pf.BDF]
	if pfDir == "" {
		return sf, fmt.Errorf("sysfs fixture: SF %d of %s: PF not written yet", sf.SFNum, pf.BDF)
	}
	if sf.Netdev == "" {
		if pf.Netdev == "" {
			return sf, fmt.Errorf("sysfs fixture: SF %d of %s: the PF has no netdev to name the SF's after; set SF.Netdev", sf.SFNum, pf.BDF)
		}
		sf.Netdev = physPortSuffix.ReplaceAllString(pf.Netdev, "") + "s" + strconv.Itoa(sf.SFNum)
	}
	if sf.RDMADev == "" && !sf.NoRDMA {
		sf.RDMADev = n.NextRDMAName()
	}
	dir := filepath.Join(pfDir, sf.Device())
	for attr, val := range map[string]string{
		"sfnum":  strconv.Itoa(sf.SFNum),
		"uevent": "DRIVER=mlx5_core.sf\nMODALIAS=auxiliary:mlx5_core.sf",
	} {
		if err := writeFile(dir, attr, val); err != nil {
			return sf, err
		}
	}
	if err := n.busLinks(dir, "auxiliary", "mlx5_core.sf"); err != nil {
		return sf, err
	}
	// the SF's netdev and RDMA device: its own MAC, the PF's MTU and link
	// layer (SFs are Ethernet only)
	nd := Function{BDF: pf.BDF, Netdev: sf.Netdev, MTU: pf.MTU, LinkLayer: Ethernet}
	if err := n.writeNetdevDir(dir, nd, sf.Netdev); err != nil {
		return sf, err
	}
	if sf.RDMADev != "" {
		if err := n.writeRDMA(dir, sf.RDMADev, Ethernet, sf.Netdev, "", "4: ACTIVE"); err != nil {
			return sf, err
		}
	}
	return sf, nil
}

// Mlx5SFNode is a node whose ConnectX-7 carries mlx5 sub-functions: port 0
// with two SFs, port 1 without.
type Mlx5SFNode struct {
	*Node
	Port0 Function // 0000:3b:00.0 enp59s0f0np0 mlx5_0, NUMA 0, root pci0000:3a
	Port1 Function // 0000:3b:00.1 enp59s0f1np1 mlx5_1, NUMA 0, root pci0000:3a
	SFs   []SF     // of Port0: mlx5_core.sf.2 (sfnum 1, enp59s0f0s1, mlx5_2), mlx5_core.sf.3 (sfnum 2, enp59s0f0s2, mlx5_3)
}

// NewMlx5SFNode writes the SF node under root:
//
//	0000:3b:00.0  enp59s0f0np0  ConnectX-7  mlx5_0  RoCE  NUMA 0
//	    mlx5_core.sf.2  sfnum 1  enp59s0f0s1  mlx5_2
//	    mlx5_core.sf.3  sfnum 2  enp59s0f0s2  mlx5_3
//	0000:3b:00.1  enp59s0f1np1  ConnectX-7  mlx5_1  RoCE  NUMA 0
func NewMlx5SFNode(root string) (*Mlx5SFNode, error) {
	n, err := New(root)
	if err != nil {
		return nil, err
	}
	s := &Mlx5SFNode{Node: n}
	s.Port0 = Function{BDF: "0000:3b:00.0", Vendor: VendorMellanox, Device: DeviceCX7, Driver: "mlx5_core", NUMA: 0,
		PCIRoot: "pci0000:3a", Upstream: "0000:3a:00.0", Netdev: "enp59s0f0np0", RDMADev: n.NextRDMAName(), IPv4: "10.0.7.1", MTU: 9000}
	s.Port1 = Function{BDF: "0000:3b:00.1", Vendor: VendorMellanox, Device: DeviceCX7, Driver: "mlx5_core", NUMA: 0,
		PCIRoot: "pci0000:3a", Upstream: "0000:3a:00.0", Netdev: "enp59s0f1np1", RDMADev: n.NextRDMAName(), IPv4: "10.0.8.1", MTU: 9000}
	for _, f := range []Function{s.Port0, s.Port1} {
		if err := n.AddFunction(f); err != nil {
			return nil, err
		}
	}
	for i := 1; i <= 2; i++ {
		sf, err := n.AddSF(s.Port0, SF{Index: 1 + i, SFNum: i})
		if err != nil {
			return nil, err
		}
		s.SFs = append(s.SFs, sf)
	}
	return s, nil
}
