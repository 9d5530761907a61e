package netops

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/vishvananda/netlink"
)

// VLAN protocols as `ip link set ... vf N vlan V proto P` spells them.
const (
	Proto8021Q  = "802.1Q"
	Proto8021ad = "802.1ad"
)

// VF link states as `ip link set ... vf N state S` spells them.
const (
	LinkStateAuto    = "auto"
	LinkStateEnable  = "enable"
	LinkStateDisable = "disable"
)

// ErrNoVF is wrapped when a PF does not report the VF asked for.
var ErrNoVF = errors.New("PF reports no VF")

// VFState is the configuration of one VF as its PF reports it.
type VFState struct {
	MAC       string `json:"mac"`
	Vlan      int    `json:"vlan"`
	QoS       int    `json:"qos"`
	Proto     string `json:"proto"`
	Spoofchk  bool   `json:"spoofchk"`
	Trust     bool   `json:"trust"`
	LinkState string `json:"linkState"`
	MinTxRate int    `json:"minTxRate"` // Mbps
	MaxTxRate int    `json:"maxTxRate"` // Mbps
}

// DefaultVFState is what a freshly created VF reports.
func DefaultVFState() VFState {
	return VFState{MAC: "00:00:00:00:00:00", Proto: Proto8021Q, Spoofchk: true, LinkState: LinkStateAuto}
}

// VFConfigurator configures VF vf of the PF netdev pf (in the calling
// thread's netns), like `ip link set <pf> vf <vf> ...`.
type VFConfigurator interface {
	VFState(pf string, vf int) (VFState, error)
	SetVFMAC(pf string, vf int, mac net.HardwareAddr) error
	SetVFVlan(pf string, vf, vlan, qos int, proto string) error
	SetVFSpoofchk(pf string, vf int, on bool) error
	SetVFTrust(pf string, vf int, on bool) error
	SetVFLinkState(pf string, vf int, state string) error
	SetVFRate(pf string, vf int, minMbps, maxMbps int) error
}

// Netlink is the kernel implementation of VFConfigurator and RDMA.
type Netlink struct{}

var _ VFConfigurator = Netlink{}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func protoNumber(p string) (int, error) {
	switch strings.ToLower(p) {
	case "", "802.1q":
		return 0x8100, nil
	case "802.1ad":
		return 0x88a8, nil
	}
	return 0, fmt.Errorf("VLAN protocol %q: want %s or %s", p, Proto8021Q, Proto8021ad)
}

func linkStateNumber(s string) (uint32, error) {
	switch s {
	case LinkStateAuto:
		return netlink.VF_LINK_STATE_AUTO, nil
	case LinkStateEnable:
		return netlink.VF_LINK_STATE_ENABLE, nil
	case LinkStateDisable:
		return netlink.VF_LINK_STATE_DISABLE, nil
	}
	return 0, fmt.Errorf("VF link state %q: want auto, enable or disable", s)
}

// VFState reads the VF's configuration from the PF's IFLA_VFINFO_LIST.
func (Netlink) VFState(pf string, vf int) (VFState, error) {
	l, err := byName(pf)
	if err != nil {
		return VFState{}, err
	}
	for _, v := range l.Attrs().Vfs {
		if v.ID != vf {
			continue
		}
		st := VFState{Vlan: v.Vlan, QoS: v.Qos, Spoofchk: v.Spoofchk, Trust: v.Trust != 0,
			MinTxRate: int(v.MinTxRate), MaxTxRate: int(v.MaxTxRate), Proto: Proto8021Q, LinkState: LinkStateAuto}
		if v.Mac != nil {
			st.MAC = v.Mac.String()
		}
		if v.VlanProto == 0x88a8 {
			st.Proto = Proto8021ad
		}
		switch v.LinkState {
		case netlink.VF_LINK_STATE_ENABLE:
			st.LinkState = LinkStateEnable
		case netlink.VF_LINK_STATE_DISABLE:
			st.LinkState = LinkStateDisable
		}
		return st, nil
	}
	return VFState{}, fmt.Errorf("ip link show %s: %w %d (SR-IOV disabled, or %s is not the PF of this VF)", pf, ErrNoVF, vf, pf)
}

func (Netlink) SetVFMAC(pf string, vf int, mac net.HardwareAddr) error {
	l, err := byName(pf)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetVfHardwareAddr(l, vf, mac); err != nil {
		return fmt.Errorf("ip link set %s vf %d mac %s: %w", pf, vf, mac, err)
	}
	return nil
}

func (Netlink) SetVFVlan(pf string, vf, vlan, qos int, proto string) error {
	p, err := protoNumber(proto)
	if err != nil {
		return err
	}
	l, err := byName(pf)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetVfVlanQosProto(l, vf, vlan, qos, p); err != nil {
		return fmt.Errorf("ip link set %s vf %d vlan %d qos %d proto %s: %w", pf, vf, vlan, qos, proto, err)
	}
	return nil
}

func (Netlink) SetVFSpoofchk(pf string, vf int, on bool) error {
	l, err := byName(pf)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetVfSpoofchk(l, vf, on); err != nil {
		return fmt.Errorf("ip link set %s vf %d spoofchk %s: %w", pf, vf, onOff(on), err)
	}
	return nil
}

func (Netlink) SetVFTrust(pf string, vf int, on bool) error {
	l, err := byName(pf)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetVfTrust(l, vf, on); err != nil {
		return fmt.Errorf("ip link set %s vf %d trust %s: %w", pf, vf, onOff(on), err)
	}
	return nil
}

func (Netlink) SetVFLinkState(pf string, vf int, state string) error {
	s, err := linkStateNumber(state)
	if err != nil {
		return err
	}
	l, err := byName(pf)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetVfState(l, vf, s); err != nil {
		return fmt.Errorf("ip link set %s vf %d state %s: %w", pf, vf, state, err)
	}
	return nil
}

func (Netlink) SetVFRate(pf string, vf int, minMbps, maxMbps int) error {
	l, err := byName(pf)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetVfRate(l, vf, minMbps, maxMbps); err != nil {
		return fmt.Errorf("ip link set %s vf %d min_tx_rate %d max_tx_rate %d: %w", pf, vf, minMbps, maxMbps, err)
	}
	return nil
}
