package sriov

import (
	"testing"

	"github.com/rdmanet/rdmanet/internal/cni/conftest"
)

// FuzzParse: any stdin is parsed or refused, never a panic; an accepted
// deviceID is a PCI address (conftest.FuzzDeviceID).
func FuzzParse(f *testing.F) {
	conftest.FuzzDeviceID(f, "sriov", func(c *Config) string { return c.DeviceID }, Parse, ParseLoose)
}
