package verify

// InfiniBand: which of the pod's networks are IB (ib-sriov, ipoib) and
// their PKeys, IB-only attachments (an RDMA device, no netdev), and the
// pod-layer checks of its IB ports (ib-port, ib-pkey). The judgement of a
// port is inventory.IBPort's (Assess, AssessPKey), the one doctor uses.

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/rdmanet/rdmanet/internal/inventory"
	"github.com/rdmanet/rdmanet/internal/lint"
	"github.com/rdmanet/rdmanet/internal/manifest"
)

// ibNet is one of the pod's networks whose NAD runs an InfiniBand plugin.
type ibNet struct {
	key  string // namespace/name of the NAD
	typ  string // ib-sriov or ipoib
	pkey uint16 // 0: the NAD names none (the default partition, or the master's for ipoib)
}

// ibNetwork returns the IB plugin and PKey of a NAD, ok false when the NAD
// runs none (or cannot be read: the network checks say so).
func ibNetwork(key string, n *NAD) (ibNet, bool) {
	if n == nil || len(n.Raw) == 0 {
		return ibNet{}, false
	}
	var obj struct {
		Spec struct {
			Config string `json:"config"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(n.Raw, &obj); err != nil {
		return ibNet{}, false
	}
	cfg, err := manifest.ParseCNIConfig(obj.Spec.Config)
	if err != nil {
		return ibNet{}, false
	}
	for _, p := range cfg.Plugins {
		if p.Type != "ib-sriov" && p.Type != "ipoib" {
			continue
		}
		out := ibNet{key: key, typ: p.Type}
		// as the plugins read it: a hex string, or (ipoib) a number
		switch v := p.Raw["pkey"].(type) {
		case string:
			if k, err := inventory.ParsePKey(v); err == nil {
				out.pkey = k
			}
		case float64:
			if v > 0 && v <= 0xffff && v == float64(uint16(v)) {
				out.pkey = uint16(v)
			}
		}
		if out.pkey&0x7fff == 0 {
			out.pkey = 0
		}
		return out, true
	}
	return ibNet{}, false
}

// onIB tells whether any of the pod's networks is an InfiniBand one.
func (c *checker) onIB() bool { return len(c.ibNets) > 0 }

// ibOnlyIf tells whether a network-status entry is an IB-only attachment:
// an IB network whose interface is the RDMA device itself (ib-sriov names
// the attachment after it when the function has no netdev).
func ibOnlyIf(ifn string, ips []string, rdmaDev string) bool {
	if ifn == "" {
		return false
	}
	return ifn == rdmaDev || (len(ips) == 0 && lint.IsVerbsDeviceName(ifn))
}

// podHCAs are the RDMA devices of the pod's own attachments: the
// device-info's, the ones whose netdev is a training interface (an IPoIB
// child's HCA in shared mode) and IB-only attachments.
func (c *checker) podHCAs() []IBDevice {
	var out []IBDevice
	for _, d := range c.view.Devices {
		mine := d.Name == c.rdmaDev || c.ibOnly[d.Name]
		for _, nd := range d.Netdevs {
			mine = mine || contains(c.trainIfs, nd)
		}
		if mine {
			out = append(out, d)
		}
	}
	return out
}

type devPort struct {
	dev  IBDevice
	port IBPort
}

func (p devPort) subject() string { return fmt.Sprintf("%s port %d", p.dev.Name, p.port.Num) }

// ibPortsOfPod are the InfiniBand ports the pod's traffic uses: those of
// its own attachments when it has any, else those NCCL would select.
func (c *checker) ibPortsOfPod() []devPort {
	devs := c.podHCAs()
	if len(devs) == 0 {
		devs = c.selectedDevices()
	}
	var out []devPort
	for _, d := range devs {
		for _, p := range d.Ports {
			// a port without the script's LID/PKey lines (an older
			// script's output) is judged only for an IB network's pod
			if p.InfiniBand() && (p.IB != nil || c.onIB()) {
				out = append(out, devPort{d, p})
			}
		}
	}
	return out
}

func (c *checker) ibPort() {
	const L = LayerPod
	ports := c.ibPortsOfPod()
	if len(ports) == 0 {
		switch {
		case c.onIB() && len(c.view.Devices) > 0:
			c.add(L, IDIBPort, Problem, fmt.Sprintf("the pod's network %s is InfiniBand (%s) but its RDMA ports are not: %s", c.ibNets[0].key, c.ibNets[0].typ, describeDevices(c.view.Devices)),
				"point the NAD's resourceName at a pool of InfiniBand functions (linkTypes [\"infiniband\"]); on RoCE use sriov (exclusive) or macvlan (shared)")
		case c.onIB():
			c.add(L, IDIBPort, Skip, "no RDMA device in the pod (see rdma-device)", "")
		default:
			c.add(L, IDIBPort, Skip, "no InfiniBand port (RoCE or no RDMA device): LID, SM LID and PKeys do not apply", "")
		}
		return
	}
	var oks, probs, unread, fixes []string
	for _, p := range ports {
		if !p.port.Active() {
			probs = append(probs, fmt.Sprintf("%s is %s, not ACTIVE", p.subject(), orDash(p.port.State)))
			fixes = append(fixes, "an IB port stays INIT/ARMED until a subnet manager activates it: run opensm on the fabric or enable the switch's SM (`sminfo`, `ibstat "+p.dev.Name+"` on the node)")
			continue
		}
		v, msg, fix := p.port.IB.Assess(p.dev.Name)
		switch v {
		case inventory.IBGood:
			oks = append(oks, p.subject()+" ACTIVE, "+msg)
		case inventory.IBUnread:
			unread = append(unread, p.subject()+": "+msg)
			fixes = append(fixes, "run kubectl rdma doctor on the node (the pod's sysfs may hide "+p.dev.Name+"'s ports/N/{lid,sm_lid,pkeys})")
		default:
			probs = append(probs, p.subject()+": "+msg)
			fixes = append(fixes, fix)
		}
	}
	switch {
	case len(probs) > 0:
		c.add(L, IDIBPort, Problem, strings.Join(append(append(probs, unread...), oks...), "; "), strings.Join(fixes, "; "))
	case len(unread) > 0:
		c.add(L, IDIBPort, Unknown, strings.Join(append(unread, oks...), "; "), strings.Join(fixes, "; "))
	default:
		c.add(L, IDIBPort, OK, strings.Join(oks, "; "), "")
	}
}

func (c *checker) ibPKey() {
	const L = LayerPod
	if !c.onIB() {
		c.add(L, IDIBPKey, Skip, "no InfiniBand network (ib-sriov, ipoib)", "")
		return
	}
	var named []ibNet
	for _, n := range c.ibNets {
		if n.pkey != 0 {
			named = append(named, n)
		}
	}
	ports := c.ibPortsOfPod()
	switch {
	case len(named) == 0:
		c.add(L, IDIBPKey, Skip, fmt.Sprintf("NAD %s names no pkey: the default partition (ipoib: the master's)", c.ibNets[0].key), "")
		return
	case len(ports) == 0:
		c.add(L, IDIBPKey, Skip, "no InfiniBand port in the pod to compare (see ib-port)", "")
		return
	}
	var oks, probs, unread, fixes []string
	for _, n := range named {
		for _, p := range ports {
			v, msg, fix := p.port.IB.AssessPKey(n.pkey)
			line := fmt.Sprintf("%s (NAD %s): %s", p.subject(), n.key, msg)
			switch v {
			case inventory.IBGood:
				oks = append(oks, line)
			case inventory.IBUnread:
				unread = append(unread, line)
			default:
				probs = append(probs, line)
				fixes = append(fixes, fix)
			}
		}
	}
	switch {
	case len(probs) > 0:
		c.add(L, IDIBPKey, Problem, strings.Join(append(append(probs, unread...), oks...), "; "), strings.Join(fixes, "; "))
	case len(unread) > 0:
		c.add(L, IDIBPKey, Unknown, strings.Join(append(unread, oks...), "; "), "run kubectl rdma doctor --pkey on the node")
	default:
		c.add(L, IDIBPKey, OK, strings.Join(oks, "; "), "")
	}
}
