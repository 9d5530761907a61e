// Package rdma implements the `rdma` CNI plugin: a drop-in replacement for
// the upstream RDMA CNI (same plugin type and config schema). Chained after
// `sriov`, it moves the VF's RDMA device into the pod's network namespace
// (RDMA subsystem in exclusive netns mode) and back on DEL.
package rdma

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/rdmanet/rdmanet/internal/cni/confkeys"
	"github.com/rdmanet/rdmanet/internal/sysfs"
)

// Validation errors, wrapped in *ConfigError.
var (
	ErrMissingDeviceID = errors.New("missing deviceID")
	ErrBadDeviceID     = errors.New("invalid deviceID")
	ErrBadJSON         = errors.New("malformed config")
)

// ConfigError names the field, the value, the rule and the fix.
type ConfigError struct {
	Field, Value, Rule, Fix string
	Err                     error
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("rdma config: field %q = %s: %s; fix: %s", e.Field, e.Value, e.Rule, e.Fix)
}

func (e *ConfigError) Unwrap() error { return e.Err }

// NetConf is the upstream RDMA CNI config schema.
type NetConf struct {
	types.NetConf
	DeviceID string `json:"deviceID,omitempty"`
	Args     struct {
		CNI struct {
			Debug bool `json:"debug,omitempty"`
		} `json:"cni,omitempty"`
	} `json:"args,omitempty"`
	RuntimeConfig struct {
		DeviceID string `json:"deviceID,omitempty"`
	} `json:"runtimeConfig,omitempty"`
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
		return nil, &ConfigError{Field: "deviceID", Value: `""`, Rule: "rdma needs the PCI address of the VF allocated to the pod",
			Fix: fixDeviceID, Err: ErrMissingDeviceID}
	}
	return c, nil
}

// ParseLoose is Parse without the deviceID requirement (for DEL and CHECK).
func ParseLoose(stdin []byte) (*Config, error) {
	var n NetConf
	if err := json.Unmarshal(stdin, &n); err != nil {
		return nil, &ConfigError{Field: "(config)", Value: "stdin", Rule: "must be a JSON object: " + err.Error(),
			Fix: "check the NAD's spec.config JSON", Err: fmt.Errorf("%w: %w", ErrBadJSON, err)}
	}
	c := &Config{CNIVersion: n.CNIVersion, Name: n.Name, DeviceID: n.DeviceID, NetConf: n.NetConf}
	if n.RuntimeConfig.DeviceID != "" {
		c.DeviceID = n.RuntimeConfig.DeviceID
	}
	if c.DeviceID != "" && !sysfs.ValidBDF(c.DeviceID) {
		return nil, &ConfigError{Field: "deviceID", Value: fmt.Sprintf("%q", c.DeviceID),
			Rule: "must be a full PCI address domain:bus:device.function, e.g. 0000:41:00.2",
			Fix:  "the device plugin pool must hand out PCI addresses; check its config", Err: ErrBadDeviceID}
	}
	return c, nil
}

// UnknownKeys returns a finding per top-level key of the config that the
// plugin does not read (nil for a config that is not a JSON object: Parse
// reports that). Pure; ADD logs them as warnings.
func UnknownKeys(stdin []byte) []confkeys.Finding {
	f, _ := confkeys.RDMA.CheckJSON(stdin)
	return f
}
