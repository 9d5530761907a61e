// Package devinfo reads and writes the Network Plumbing WG device-info files
// a device plugin leaves for the CNI side (spec "Device Information", v1.1.0):
// <dir>/<resource with '/' as '->-<deviceID>-device.json, dir normally
// /var/run/k8s.cni.cncf.io/devinfo/dp. The directory is a parameter so the
// agent, the meta CNI and tests agree on a temporary one.
package devinfo

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"

	"github.com/rdmanet/rdmanet/internal/fsutil"
	"github.com/rdmanet/rdmanet/internal/safename"
)

// DefaultDir is where device plugins write device-info files on a node.
const DefaultDir = "/var/run/k8s.cni.cncf.io/devinfo/dp"

// Path returns the file for a resource's device.
func Path(dir, resource, deviceID string) string {
	return filepath.Join(dir, fmt.Sprintf("%s-%s-device.json",
		strings.ReplaceAll(resource, "/", "-"), strings.ReplaceAll(deviceID, "/", "-")))
}

// PCI builds a pci device-info record.
func PCI(pci, pf, rdma string) *nadv1.DeviceInfo {
	return &nadv1.DeviceInfo{Type: nadv1.DeviceInfoTypePCI, Version: nadv1.DeviceInfoVersion,
		Pci: &nadv1.PciDevice{PciAddress: pci, PfPciAddress: pf, RdmaDevice: rdma}}
}

// checkName refuses a resource or device ID that makes no plain file name
// in dir (Path already turns '/' into '-'; left are NUL and length).
func checkName(resource, deviceID string) error {
	return safename.Check(safename.FileName, "device-info file name of resource "+resource+" device "+deviceID,
		filepath.Base(Path("", resource, deviceID)))
}

// Write stores info atomically (temp file + rename), replacing an older file.
//
// Modes: the file is 0600 and a missing dir is created 0700. Every reader
// of device-info files (Multus or rdmanet's meta CNI, the CNI plugins they
// run) runs as root, and pods see device information only through the
// network-status annotation, so nothing needs the file world-readable. The
// upstream helper (network-attachment-definition-client's
// SaveDeviceInfoForDP) writes 0444 files but creates the dir with no
// permission bits at all, so there too only root reads them. An existing
// dir is left as it is: it is shared with other device plugins.
func Write(dir, resource, deviceID string, info *nadv1.DeviceInfo) error {
	if err := checkName(resource, deviceID); err != nil {
		return fmt.Errorf("device-info: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("device-info dir %s: %w", dir, err)
	}
	b, err := json.Marshal(info)
	if err != nil {
		return fmt.Errorf("device-info for %s %s: %w", resource, deviceID, err)
	}
	return fsutil.WriteFileAtomic(Path(dir, resource, deviceID), b, 0o600)
}

// Read loads a device-info file; (nil, nil) when it does not exist.
func Read(dir, resource, deviceID string) (*nadv1.DeviceInfo, error) {
	if err := checkName(resource, deviceID); err != nil {
		return nil, fmt.Errorf("device-info: %w", err)
	}
	p := Path(dir, resource, deviceID)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("device-info %s: %w", p, err)
	}
	var info nadv1.DeviceInfo
	if err := json.Unmarshal(b, &info); err != nil {
		return nil, fmt.Errorf("device-info %s is not valid JSON: %w", p, err)
	}
	return &info, nil
}

// Remove deletes a device-info file; a missing file is not an error.
func Remove(dir, resource, deviceID string) error {
	err := os.Remove(Path(dir, resource, deviceID))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("device-info: %w", err)
	}
	return nil
}
