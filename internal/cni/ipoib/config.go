// Package ipoib implements the `ipoib` CNI plugin: a drop-in replacement for
// ipoib-cni (same plugin type and config schema). It is rdmanet's shared
// mode on InfiniBand: an IPoIB child interface of the IB port's netdev
// becomes the pod's interface (net1) while the pod shares the port's HCA
// through the device plugin's shared pool, as macvlan does on RoCE. A
// network that names a PKey gets a child in that partition.
package ipoib

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/rdmanet/rdmanet/internal/cni/cniconf"
	"github.com/rdmanet/rdmanet/internal/cni/confkeys"
	"github.com/rdmanet/rdmanet/internal/inventory"
	"github.com/rdmanet/rdmanet/internal/sysfs"
)

// Validation errors, wrapped in *ConfigError.
var (
	ErrBadJSON       = cniconf.ErrBadJSON
	ErrNoMaster      = errors.New("missing master")
	ErrBadPKey       = cniconf.ErrBadPKey
	ErrBadMTU        = cniconf.ErrBadMTU
	ErrDHCP          = errors.New("dhcp IPAM not supported")
	ErrBadDeviceID   = cniconf.ErrBadDeviceID
	ErrNotInfiniBand = errors.New("not an InfiniBand port")
)

// ConfigError names the field, the value, the rule and the fix.
type ConfigError struct {
	Network, Field, Value, Rule, Fix string
	Err                              error
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("ipoib config (network %q): field %q = %s: %s; fix: %s", e.Network, e.Field, e.Value, e.Rule, e.Fix)
}

func (e *ConfigError) Unwrap() error { return e.Err }

// NetConf is ipoib-cni's config schema (master, ipam; mtu as its
// predecessor "infiniband" plugin documents it) plus what rdmanet's meta
// plugin injects (deviceID) and the PKey key ib-sriov-cni users already
// write (pkey).
type NetConf struct {
	types.NetConf
	Master   string          `json:"master"`
	MTU      int             `json:"mtu,omitempty"`
	PKey     json.RawMessage `json:"pkey,omitempty"`
	DeviceID string          `json:"deviceID,omitempty"`
	// RuntimeConfig.DeviceID is where Multus-style runtimes put it.
	RuntimeConfig cniconf.RuntimeDevice `json:"runtimeConfig,omitempty"`
}

// Config is the validated configuration.
type Config struct {
	CNIVersion string
	Name       string
	// Master is the IB port's IPoIB netdev; "" in a DEL/CHECK config that
	// named none.
	Master string
	// DeviceID is the PCI address the meta plugin injected (the shared
	// pool's HCA); Master is resolved from it when the config names none.
	DeviceID string
	MTU      int
	// PKey is the partition the child joins (membership bit as written);
	// HasPKey is false when the network names none: the child then takes
	// its master's PKey, as ipoib-cni does.
	PKey     uint16
	HasPKey  bool
	IPAMType string
	NetConf  types.NetConf
}

// Catalogue is what the plugin reads (for the unknown-key warnings; lint
// uses the same confkeys.IPoIB).
var Catalogue = confkeys.IPoIB

// UnknownKeys returns a finding per top-level key the plugin does not read.
func UnknownKeys(stdin []byte) []confkeys.Finding {
	f, _ := Catalogue.CheckJSON(stdin)
	return f
}

const fixMaster = `name the IB port's IPoIB netdev, e.g. "master": "ibp193s0f0" (ip -d link shows "ipoib"; ibdev2netdev maps HCA ports to netdevs), ` +
	`or request the IB port's shared pool so that the meta plugin injects its deviceID`

// Parse decodes and validates an ipoib config for ADD; it touches nothing
// on the host. A config that names neither master nor deviceID is refused.
func Parse(stdin []byte) (*Config, error) {
	c, err := ParseLoose(stdin)
	if err != nil {
		return nil, err
	}
	if c.Master == "" && c.DeviceID == "" {
		return nil, &ConfigError{Network: c.Name, Field: "master", Value: `""`, Rule: "the IPoIB child needs a parent: the IB port's IPoIB netdev",
			Fix: fixMaster, Err: ErrNoMaster}
	}
	return c, nil
}

// ParseLoose is Parse without the master requirement (for DEL and CHECK).
func ParseLoose(stdin []byte) (*Config, error) {
	var n NetConf
	if err := json.Unmarshal(stdin, &n); err != nil {
		return nil, &ConfigError{Field: "(config)", Value: "stdin", Rule: "must be a JSON object: " + err.Error(),
			Fix: "check the NAD's spec.config JSON", Err: fmt.Errorf("%w: %w", ErrBadJSON, err)}
	}
	c := &Config{CNIVersion: n.CNIVersion, Name: n.Name, Master: n.Master, MTU: n.MTU, DeviceID: n.DeviceID, IPAMType: n.IPAM.Type, NetConf: n.NetConf}
	if n.RuntimeConfig.DeviceID != "" {
		c.DeviceID = n.RuntimeConfig.DeviceID
	}
	if c.DeviceID != "" && !sysfs.ValidBDF(c.DeviceID) {
		return nil, &ConfigError{Network: c.Name, Field: "deviceID", Value: strconv.Quote(c.DeviceID),
			Rule: "must be a full PCI address domain:bus:device.function, e.g. 0000:c1:00.0",
			Fix:  "the shared pool must hand out PCI addresses; check the device plugin config", Err: ErrBadDeviceID}
	}
	if n.MTU < 0 {
		return nil, &ConfigError{Network: c.Name, Field: "mtu", Value: strconv.Itoa(n.MTU), Rule: "must be 0 (the kernel's choice) or positive",
			Fix: "use the IB port's IPoIB MTU: 2044 or 4092 in datagram mode, up to 65520 in connected mode", Err: ErrBadMTU}
	}
	if len(n.PKey) > 0 && string(n.PKey) != "null" {
		pk, err := parsePKey(n.PKey)
		if err != nil {
			return nil, &ConfigError{Network: c.Name, Field: "pkey", Value: string(n.PKey), Rule: err.Error(),
				Fix: `write the partition key in hex as the subnet manager's partitions.conf does, e.g. "pkey": "0x8001" (0x0001-0x7fff, the full-membership bit 0x8000 optional)`,
				Err: ErrBadPKey}
		}
		c.PKey, c.HasPKey = pk, true
	}
	if c.IPAMType == "dhcp" {
		return nil, &ConfigError{Network: c.Name, Field: "ipam.type", Value: `"dhcp"`,
			Rule: "DHCP is not supported on IPoIB children (ipoib-cni refuses it as well)",
			Fix:  `use a static IPAM: "rdmanet-ipam"/"whereabouts" or "host-local"`, Err: ErrDHCP}
	}
	return c, nil
}

// parsePKey reads a PKey written as a hex string ("0x8001", "8001") or a
// JSON number; the partition number (low 15 bits) must not be 0.
func parsePKey(raw json.RawMessage) (uint16, error) {
	var k uint16
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if k, err = inventory.ParsePKey(s); err != nil {
			return 0, err
		}
	} else {
		var f float64
		if err := json.Unmarshal(raw, &f); err != nil || f < 0 || f != float64(uint64(f)) {
			return 0, errors.New("must be a hex string or a non-negative integer")
		}
		if f > 0xffff {
			return 0, errors.New("is wider than 16 bits")
		}
		k = uint16(f)
	}
	return k, inventory.CheckPKeyPartition(k)
}
