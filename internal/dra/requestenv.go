package dra

// One PCIDEVICE_ value per pool for a claim used whole (docs/dra.md,
// "Prepare"): what the device plugin's Allocate gives for the same VFs.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rdmanet/rdmanet/internal/deviceplugin"
)

// joinRequestEnv: a claim with several requests of one pool (8 NICs of
// one pool as nic-0 … nic-7) gives each request its own PCIDEVICE_ value
// (setEnv), so a container using the whole claim would see only the value
// of the CDI device the runtime applies last. When every container using
// the claim uses it whole (resources.claims without a request, and not as
// an extended resource, whose claims have one request per container), the
// claim gives one joined value per pool instead, on its first device of
// that pool: what the device plugin's Allocate gives for the same VFs. The
// reserving pods are read only for such claims; a pod that cannot be read
// keeps the per-request values (logged).
func (d *Driver) joinRequestEnv(ctx context.Context, claims []*resourceapi.ResourceClaim, resolved map[types.UID]*preparedClaim, pods *podCache) {
	for _, c := range claims {
		pc := resolved[c.UID]
		if pc == nil || !sharesPool(pc) {
			continue
		}
		whole, why := d.usedWhole(ctx, c, pods)
		if !whole {
			d.log.Info("PCIDEVICE_ per request: the claim has several requests of one pool, and "+why, "claim", c.Namespace+"/"+c.Name)
			continue
		}
		joinEnv(pc)
	}
}

// sharesPool: two requests of the claim have exclusive devices of one pool.
func sharesPool(pc *preparedClaim) bool {
	reqs := map[string]string{} // resource -> first request
	for _, dev := range pc.Devices {
		if dev.Kind != KindExclusive {
			continue
		}
		if r, ok := reqs[dev.Resource]; ok && r != dev.Requests[0] {
			return true
		}
		reqs[dev.Resource] = dev.Requests[0]
	}
	return false
}

// usedWhole tells whether every container of the pods the claim is
// reserved for that uses it uses all of it; why says why not.
func (d *Driver) usedWhole(ctx context.Context, c *resourceapi.ResourceClaim, pods *podCache) (bool, string) {
	if len(c.Status.ReservedFor) == 0 {
		return false, "it is reserved for no pod"
	}
	for _, ref := range c.Status.ReservedFor {
		if ref.APIGroup != "" || ref.Resource != "pods" {
			return false, "it is reserved for " + ref.Resource + " " + ref.Name + ", not a pod"
		}
		pod, err := pods.pod(ctx, types.NamespacedName{Namespace: c.Namespace, Name: ref.Name})
		if err != nil {
			return false, fmt.Sprintf("pod %s/%s cannot be read: %v", c.Namespace, ref.Name, err)
		}
		if x := pod.Status.ExtendedResourceClaimStatus; x != nil && x.ResourceClaimName == c.Name {
			return false, "it serves extended resources (one request per container)"
		}
		names := podClaimNames(pod)
		for _, ctr := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
			for _, rc := range ctr.Resources.Claims {
				if rc.Request != "" && names[rc.Name] == c.Name {
					return false, fmt.Sprintf("container %s of pod %s uses only its request %s", ctr.Name, pod.Name, rc.Request)
				}
			}
		}
	}
	return true, ""
}

// joinEnv replaces the per-request PCIDEVICE_ values with one per pool,
// all the pool's devices of the claim in order, on its first device.
func joinEnv(pc *preparedClaim) {
	first := map[string]int{}
	var order []string
	pcis := map[string][]string{}
	for i, dev := range pc.Devices {
		if dev.Kind != KindExclusive {
			continue
		}
		if _, ok := first[dev.Resource]; !ok {
			first[dev.Resource] = i
			order = append(order, dev.Resource)
		}
		pcis[dev.Resource] = append(pcis[dev.Resource], dev.PCI)
	}
	for i := range pc.Devices {
		dev := &pc.Devices[i]
		if dev.Kind != KindExclusive {
			continue
		}
		prefix := deviceplugin.EnvName(dev.Resource) + "="
		dev.Env = slices.DeleteFunc(dev.Env, func(e string) bool { return strings.HasPrefix(e, prefix) })
	}
	for _, res := range order {
		dev := &pc.Devices[first[res]]
		dev.Env = append(dev.Env, deviceplugin.EnvName(res)+"="+strings.Join(pcis[res], ","))
	}
}
