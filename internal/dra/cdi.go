package dra

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/rdmanet/rdmanet/internal/fsutil"
)

// DefaultCDIDir is where container runtimes look for CDI spec files.
const DefaultCDIDir = "/var/run/cdi"

// CDIKind is the CDI kind (vendor/class) of the devices the kubelet
// plugin prepares: one spec file per claim, one CDI device per allocated
// device, named "<claim UID>-<device>".
const CDIKind = DriverName + "/claim"

// cdiSpecPath is the claim's spec file in dir ("<vendor>-<class>_<name>.json",
// the CDI convention).
func cdiSpecPath(dir string, uid types.UID) string {
	return filepath.Join(dir, DriverName+"-claim_"+string(uid)+".json")
}

// cdiDeviceID is the fully qualified CDI device ID kubelet hands the runtime.
func cdiDeviceID(name string) string { return CDIKind + "=" + name }

// cdiSpec builds a claim's CDI spec: every device gets its RDMA character
// devices (the same /dev/infiniband nodes, rdma_cm included, that the
// device plugin's Allocate gives) and its environment; the first device
// also carries the claim's NCCL environment.
func cdiSpec(c *preparedClaim) (*cdispec.Spec, error) {
	spec := &cdispec.Spec{Kind: CDIKind, Annotations: map[string]string{
		DriverName + "/claim": c.name(),
	}}
	for i, d := range c.Devices {
		env := d.Env
		if i == 0 && len(c.Env) > 0 {
			env = append(append([]string(nil), d.Env...), c.Env...)
		}
		dev := cdispec.Device{Name: d.CDIName, ContainerEdits: cdispec.ContainerEdits{Env: env}}
		for _, p := range d.CharDevs {
			dev.ContainerEdits.DeviceNodes = append(dev.ContainerEdits.DeviceNodes, &cdispec.DeviceNode{Path: p, HostPath: p, Permissions: "rw"})
		}
		spec.Devices = append(spec.Devices, dev)
	}
	v, err := cdispec.MinimumRequiredVersion(spec)
	if err != nil {
		return nil, fmt.Errorf("CDI spec of claim %s: %w", c.name(), err)
	}
	spec.Version = v
	return spec, nil
}

// writeCDISpec writes the claim's spec file atomically. The file is 0644:
// the container runtime reads it, and it holds nothing secret. A claim
// without devices of this driver gets no file (a CDI spec must have a device).
func writeCDISpec(dir string, uid types.UID, c *preparedClaim) error {
	if len(c.Devices) == 0 {
		return nil
	}
	spec, err := cdiSpec(c)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return fmt.Errorf("CDI spec of claim %s: %w", c.name(), err)
	}
	if err := fsutil.WriteFileAtomic(cdiSpecPath(dir, uid), b, 0o644); err != nil {
		return fmt.Errorf("CDI spec of claim %s: %w; fix: the CDI dir (--cdi-dir) must be a writable host path the container runtime reads", c.name(), err)
	}
	return nil
}

// removeCDISpec removes the claim's spec file; a missing one is fine.
func removeCDISpec(dir string, uid types.UID) error {
	if err := os.Remove(cdiSpecPath(dir, uid)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("CDI spec of claim %s: %w", uid, err)
	}
	return nil
}
