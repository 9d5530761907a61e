// Package sriov implements the `sriov` CNI plugin: a drop-in replacement for
// the upstream SR-IOV CNI (same plugin type and config schema) that hands an
// allocated VF to a pod and gives it back exactly as it found it.
//
// Config parsing (this file) is pure. The verbs (sriov.go) run over injected
// host-facing operations (internal/netops), a sysfs root and a state dir.
package sriov

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/rdmanet/rdmanet/internal/cni/cniconf"
	"github.com/rdmanet/rdmanet/internal/cni/confkeys"
)

// Validation errors; every error from Parse wraps one of them in a *ConfigError.
var (
	ErrMissingDeviceID = cniconf.ErrMissingDeviceID
	ErrBadDeviceID     = cniconf.ErrBadDeviceID
	ErrBadVlan         = errors.New("invalid vlan")
	ErrBadVlanQoS      = errors.New("invalid vlanQoS")
	ErrBadVlanProto    = errors.New("invalid vlanProto")
	ErrBadMAC          = errors.New("invalid mac")
	ErrBadSpoofchk     = errors.New("invalid spoofchk")
	ErrBadTrust        = errors.New("invalid trust")
	ErrBadLinkState    = cniconf.ErrBadLinkState
	ErrBadTxRate       = errors.New("invalid tx rate")
	ErrBadMTU          = cniconf.ErrBadMTU
	ErrBadJSON         = cniconf.ErrBadJSON
)

// ConfigError names the field, the value, the rule and the fix.
type ConfigError = cniconf.Error

func cfgErr(err error, field, value, rule, fix string) error {
	return cniconf.Refuse("sriov", err, field, value, rule, fix)
}

// NetConf is the upstream SR-IOV CNI config schema, field for field.
type NetConf struct {
	types.NetConf
	DeviceID  string  `json:"deviceID,omitempty"`
	Master    string  `json:"master,omitempty"` // accepted for compatibility; the PF is found from deviceID
	MAC       string  `json:"mac,omitempty"`
	Vlan      *int    `json:"vlan,omitempty"`
	VlanQoS   *int    `json:"vlanQoS,omitempty"`
	VlanProto *string `json:"vlanProto,omitempty"`
	SpoofChk  string  `json:"spoofchk,omitempty"`
	Trust     string  `json:"trust,omitempty"`
	LinkState string  `json:"link_state,omitempty"`
	MinTxRate *int    `json:"min_tx_rate,omitempty"`
	MaxTxRate *int    `json:"max_tx_rate,omitempty"`
	MTU       *int    `json:"mtu,omitempty"`
	LogLevel  string  `json:"logLevel,omitempty"`
	LogFile   string  `json:"logFile,omitempty"`

	RuntimeConfig struct {
		Mac      string `json:"mac,omitempty"`
		DeviceID string `json:"deviceID,omitempty"`
	} `json:"runtimeConfig,omitempty"`
}

// Config is the validated, defaulted configuration.
type Config struct {
	CNIVersion string `json:"cniVersion"`
	Name       string `json:"name"`
	IPAMType   string `json:"ipamType,omitempty"`
	DeviceID   string `json:"deviceID"`
	MAC        string `json:"mac,omitempty"` // "" leaves the VF MAC alone
	Vlan       int    `json:"vlan"`
	VlanQoS    int    `json:"vlanQoS"`
	VlanProto  string `json:"vlanProto"` // netops.Proto8021Q or netops.Proto8021ad
	SpoofChk   *bool  `json:"spoofchk,omitempty"`
	Trust      *bool  `json:"trust,omitempty"`
	LinkState  string `json:"linkState,omitempty"`
	MinTxRate  *int   `json:"minTxRate,omitempty"`
	MaxTxRate  *int   `json:"maxTxRate,omitempty"`
	MTU        int    `json:"mtu,omitempty"` // 0 leaves the MTU alone
	LogFile    string `json:"logFile,omitempty"`
}

const fixDeviceID = "the NAD's k8s.v1.cni.cncf.io/resourceName annotation probably does not match the device plugin pool " +
	"(resourcePrefix/resourceName) or the pod's resource request, so the meta plugin had no allocated VF to inject; " +
	"make the three names identical, or set deviceID (PCI address of a VF, e.g. 0000:41:00.2) by hand"

// Parse decodes, defaults and validates a sriov config. It touches nothing
// on the host. A deviceID is required; use ParseLoose for DEL.
func Parse(stdin []byte) (*Config, error) {
	c, err := parse(stdin)
	if err != nil {
		return nil, err
	}
	if c.DeviceID == "" {
		return nil, cfgErr(ErrMissingDeviceID, "deviceID", `""`,
			"sriov needs the PCI address of the VF allocated to the pod", fixDeviceID)
	}
	return c, nil
}

// ParseLoose is Parse without the deviceID requirement (DEL and CHECK can
// find the VF from the cache).
func ParseLoose(stdin []byte) (*Config, error) { return parse(stdin) }

func parse(stdin []byte) (*Config, error) {
	var n NetConf
	if err := cniconf.Decode("sriov", stdin, &n); err != nil {
		return nil, err
	}
	c := &Config{CNIVersion: n.CNIVersion, Name: n.Name, IPAMType: n.IPAM.Type, LogFile: n.LogFile}
	var err error
	if c.DeviceID, err = cniconf.Device("sriov", n.DeviceID, n.RuntimeConfig.DeviceID); err != nil {
		return nil, err
	}

	c.MAC = n.MAC
	if n.RuntimeConfig.Mac != "" {
		c.MAC = n.RuntimeConfig.Mac
	}
	if c.MAC != "" {
		hw, err := net.ParseMAC(c.MAC)
		if err != nil || len(hw) != 6 || hw[0]&1 == 1 || hw.String() == "00:00:00:00:00:00" {
			return nil, cfgErr(ErrBadMAC, "mac", fmt.Sprintf("%q", c.MAC),
				"must be a unicast, non-zero 48-bit Ethernet address like 02:00:00:aa:bb:cc",
				"correct the MAC in the NAD or the pod's runtimeConfig, or drop it to keep the VF's own")
		}
		c.MAC = hw.String()
	}

	if n.Vlan != nil {
		c.Vlan = *n.Vlan
	}
	if c.Vlan < 0 || c.Vlan > 4094 {
		return nil, cfgErr(ErrBadVlan, "vlan", fmt.Sprint(c.Vlan),
			"must be 0-4094 (0 = untagged; 4095 is reserved by 802.1Q)",
			"use the training network's VLAN ID from the switch plan, e.g. 200")
	}
	if n.VlanQoS != nil {
		c.VlanQoS = *n.VlanQoS
	}
	if c.VlanQoS < 0 || c.VlanQoS > 7 {
		return nil, cfgErr(ErrBadVlanQoS, "vlanQoS", fmt.Sprint(c.VlanQoS),
			"must be an 802.1p priority 0-7", "use the priority your RoCE PFC class uses (often 3)")
	}
	if c.Vlan == 0 && c.VlanQoS != 0 {
		return nil, cfgErr(ErrBadVlanQoS, "vlanQoS", fmt.Sprint(c.VlanQoS),
			"a non-zero QoS needs a VLAN tag (vlan is 0)", "set vlan, or drop vlanQoS")
	}
	c.VlanProto = "802.1Q"
	if n.VlanProto != nil {
		switch strings.ToLower(*n.VlanProto) {
		case "802.1q":
		case "802.1ad":
			c.VlanProto = "802.1ad"
		default:
			return nil, cfgErr(ErrBadVlanProto, "vlanProto", fmt.Sprintf("%q", *n.VlanProto),
				`must be "802.1Q" or "802.1ad"`, `use "802.1Q" unless the fabric uses QinQ`)
		}
	}
	if c.Vlan == 0 && c.VlanProto != "802.1Q" {
		return nil, cfgErr(ErrBadVlanProto, "vlanProto", fmt.Sprintf("%q", c.VlanProto),
			"a VLAN protocol other than 802.1Q needs a VLAN tag (vlan is 0)", "set vlan, or drop vlanProto")
	}

	if c.SpoofChk, err = onOff(n.SpoofChk, "spoofchk", ErrBadSpoofchk); err != nil {
		return nil, err
	}
	if c.Trust, err = onOff(n.Trust, "trust", ErrBadTrust); err != nil {
		return nil, err
	}
	switch n.LinkState {
	case "", "auto", "enable", "disable":
		c.LinkState = n.LinkState
	default:
		return nil, cfgErr(ErrBadLinkState, "link_state", fmt.Sprintf("%q", n.LinkState),
			`must be "auto", "enable" or "disable"`, `use "auto" to follow the PF's link, or drop the field`)
	}

	for _, r := range []struct {
		field string
		v     *int
	}{{"min_tx_rate", n.MinTxRate}, {"max_tx_rate", n.MaxTxRate}} {
		if r.v != nil && *r.v < 0 {
			return nil, cfgErr(ErrBadTxRate, r.field, fmt.Sprint(*r.v),
				"must be >= 0 Mbps (0 = no limit)", "use a rate in Mbps, or 0")
		}
	}
	c.MinTxRate, c.MaxTxRate = n.MinTxRate, n.MaxTxRate
	if c.MinTxRate != nil && c.MaxTxRate != nil && *c.MaxTxRate != 0 && *c.MinTxRate > *c.MaxTxRate {
		return nil, cfgErr(ErrBadTxRate, "min_tx_rate", fmt.Sprint(*c.MinTxRate),
			fmt.Sprintf("must not exceed max_tx_rate (%d Mbps)", *c.MaxTxRate), "lower min_tx_rate or raise max_tx_rate")
	}

	if n.MTU != nil {
		if *n.MTU < 68 || *n.MTU > 65535 {
			return nil, cfgErr(ErrBadMTU, "mtu", fmt.Sprint(*n.MTU),
				"must be 68-65535", "use the training fabric's MTU (RoCE: usually 9000 or 4200), or drop it to keep the VF's")
		}
		c.MTU = *n.MTU
	}
	return c, nil
}

func onOff(v, field string, sentinel error) (*bool, error) {
	switch v {
	case "":
		return nil, nil
	case "on":
		b := true
		return &b, nil
	case "off":
		b := false
		return &b, nil
	}
	return nil, cfgErr(sentinel, field, fmt.Sprintf("%q", v), `must be "on" or "off"`,
		fmt.Sprintf(`write "on" or "off" (a string), or drop %s to keep the VF's setting`, field))
}

// UnknownKeys returns a finding per top-level key of the config that the
// plugin does not read (nil for a config that is not a JSON object: Parse
// reports that). Pure; ADD logs them as warnings.
func UnknownKeys(stdin []byte) []confkeys.Finding {
	f, _ := confkeys.SRIOV.CheckJSON(stdin)
	return f
}
