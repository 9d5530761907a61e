// Package cniconf reads what the configs of rdmanet's plugins carry the
// same way: the JSON object itself and the device it names (deviceID, or
// runtimeConfig.deviceID where runtimes put it), the error that names a
// refused field, its value, the rule and the fix (the VF plugins sriov,
// rdma and ib-sriov), and the errors a refused field wraps (ipoib too). It
// is pure: it touches nothing on the host.
package cniconf

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/rdmanet/rdmanet/internal/sysfs"
)

// The errors a refused config wraps: of the config itself and its device,
var (
	ErrBadJSON         = errors.New("malformed config")
	ErrMissingDeviceID = errors.New("missing deviceID")
	ErrBadDeviceID     = errors.New("invalid deviceID")
)

// and of the fields several plugins read.
var (
	ErrBadMTU       = errors.New("invalid mtu")
	ErrBadPKey      = errors.New("invalid pkey")
	ErrBadLinkState = errors.New("invalid link_state")
)

// Error names the plugin, the field, the value, the rule and the fix.
type Error struct {
	Plugin                  string
	Field, Value, Rule, Fix string
	Err                     error
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s config: field %q = %s: %s; fix: %s", e.Plugin, e.Field, e.Value, e.Rule, e.Fix)
}

func (e *Error) Unwrap() error { return e.Err }

// Refuse is the plugin's *Error of field (sentinel err).
func Refuse(plugin string, err error, field, value, rule, fix string) error {
	return &Error{Plugin: plugin, Field: field, Value: value, Rule: rule, Fix: fix, Err: err}
}

// Decode decodes stdin, which must be a JSON object, into n (the plugin's
// NetConf; keys matched as encoding/json matches them).
func Decode(plugin string, stdin []byte, n any) error {
	if err := json.Unmarshal(stdin, n); err != nil {
		return &Error{Plugin: plugin, Field: "(config)", Value: "stdin", Rule: "must be a JSON object: " + err.Error(),
			Fix: "check the NAD's spec.config JSON", Err: fmt.Errorf("%w: %w", ErrBadJSON, err)}
	}
	return nil
}

// RuntimeDevice is a config's runtimeConfig of a plugin that reads only the
// device from it (rdma, ipoib): where Multus-style runtimes put deviceID.
type RuntimeDevice struct {
	DeviceID string `json:"deviceID,omitempty"`
}

// Device is the device a config names: runtimeConfig's deviceID (runtime)
// when set, else the config's (conf); "" when neither is. One that is not
// a full PCI address is refused: it would become a state file name.
func Device(plugin, conf, runtime string) (string, error) {
	id := conf
	if runtime != "" {
		id = runtime
	}
	if id != "" && !sysfs.ValidBDF(id) {
		return "", Refuse(plugin, ErrBadDeviceID, "deviceID", fmt.Sprintf("%q", id),
			"must be a full PCI address domain:bus:device.function, e.g. 0000:41:00.2",
			"the device plugin pool must hand out PCI addresses (not netdev names); check its config")
	}
	return id, nil
}
