package meta

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Devices is what kubelet allocated to a pod: resource name → device IDs in
// container order, then device order.
type Devices map[string][]string

// ClaimDevice is a device a DRA ResourceClaim allocated to the pod, as
// kubelet's PodResources reports it (driver, pool, device), with the claim
// it came through.
type ClaimDevice struct {
	Namespace string `json:"namespace"`
	Claim     string `json:"claim"`
	Driver    string `json:"driver"`
	Pool      string `json:"pool"`
	Device    string `json:"device"`
	ShareID   string `json:"shareID,omitempty"`
}

func (c ClaimDevice) String() string {
	return fmt.Sprintf("claim %s/%s device %s/%s/%s", c.Namespace, c.Claim, c.Driver, c.Pool, c.Device)
}

// Allocation is what kubelet allocated to a pod for its networks: device
// plugin devices and DRA claim devices that are network devices (their
// ResourceSlice names a resourceName), both by resource name, so a NAD's
// k8s.v1.cni.cncf.io/resourceName finds its device either way.
type Allocation struct {
	Devices Devices
	// Claims: device ID → the claim device it came from (DRA only).
	Claims map[string]ClaimDevice
	// Unresolved lists the pod's DRA devices that are not network devices
	// or could not be looked up, for error messages.
	Unresolved []string
}

// DeviceLister asks kubelet which devices a pod holds.
type DeviceLister interface {
	PodDevices(ctx context.Context, namespace, name string) (*Allocation, error)
}

// requestedExtended lists the pod's extended-resource requests (what it
// asked for), for error messages about mismatched resource names.
func requestedExtended(pod *corev1.Pod) string {
	req := map[string]string{}
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		for _, rl := range []corev1.ResourceList{c.Resources.Limits, c.Resources.Requests} {
			for name, q := range rl {
				if strings.Contains(string(name), "/") && !strings.HasPrefix(string(name), "kubernetes.io/") {
					req[string(name)] = q.String()
				}
			}
		}
	}
	if len(req) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(req))
	for k := range req {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + req[k]
	}
	return strings.Join(parts, ", ")
}
