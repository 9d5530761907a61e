// Package rdma implements the `rdma` CNI plugin: a drop-in replacement for
// the upstream RDMA CNI (same plugin type and config schema). Chained after
// `sriov`, it moves the VF's RDMA device into the pod's network namespace
// (RDMA subsystem in exclusive netns mode) and back on DEL.
package rdma

import (
	"github.com/containernetworking/cni/pkg/types"

	"github.com/rdmanet/rdmanet/internal/cni/cniconf"
	"github.com/rdmanet/rdmanet/internal/cni/confkeys"
)

// ConfigError names the field, the value, the rule and the fix.
type ConfigError = cniconf.Error

// Validation errors, wrapped in *ConfigError.
var (
	ErrMissingDeviceID = cniconf.ErrMissingDeviceID
	ErrBadDeviceID     = cniconf.ErrBadDeviceID
	ErrBadJSON         = cniconf.ErrBadJSON
)

// NetConf is the upstream RDMA CNI config schema.
type NetConf struct {
	types.NetConf
	DeviceID string `json:"deviceID,omitempty"`
	Args     struct {
		CNI struct {
			Debug bool `json:"debug,omitempty"`
		} `json:"cni,omitempty"`
	} `json:"args,omitempty"`
	RuntimeConfig cniconf.RuntimeDevice `json:"runtimeConfig,omitempty"`
}

// Config is the validated configuration.
type Config struct {
	CNIVersion string
	Name       string
	DeviceID   string
	NetConf    types.NetConf // with RawPrevResult
}

const fixDeviceID = "the NAD's k8s.v1.cni.cncf.io/resourceName annotation probably does not match the device plugin pool " +
	"or the pod's resource request, so the meta plugin had no allocated VF to inject; make the three names identical"

// Parse decodes and validates an rdma config; it touches nothing on the host.
func Parse(stdin []byte) (*Config, error) {
	c, err := ParseLoose(stdin)
	if err != nil {
		return nil, err
	}
	if c.DeviceID == "" {
		return nil, cniconf.Refuse("rdma", ErrMissingDeviceID, "deviceID", `""`, "rdma needs the PCI address of the VF allocated to the pod", fixDeviceID)
	}
	return c, nil
}

// ParseLoose is Parse without the deviceID requirement (for DEL and CHECK).
func ParseLoose(stdin []byte) (*Config, error) {
	var n NetConf
	if err := cniconf.Decode("rdma", stdin, &n); err != nil {
		return nil, err
	}
	id, err := cniconf.Device("rdma", n.DeviceID, n.RuntimeConfig.DeviceID)
	if err != nil {
		return nil, err
	}
	return &Config{CNIVersion: n.CNIVersion, Name: n.Name, DeviceID: id, NetConf: n.NetConf}, nil
}

// UnknownKeys returns a finding per top-level key of the config that the
// plugin does not read (nil for a config that is not a JSON object: Parse
// reports that). Pure; ADD logs them as warnings.
func UnknownKeys(stdin []byte) []confkeys.Finding {
	f, _ := confkeys.RDMA.CheckJSON(stdin)
	return f
}
