package render

import (
	"fmt"
	"strings"
)

// The DRA path (Spec.DRA, docs/dra.md "Tooling"): the pool config stays (the
// agent publishes its advertised pools as DRA devices), the NADs stay as
// they are (the meta CNI ties a claim's device to the NAD whose
// k8s.v1.cni.cncf.io/resourceName equals the device's
// k8s.cni.cncf.io/resourceName attribute, the pool's resource name), and the
// Job takes its NICs (and GPUs) from one ResourceClaimTemplate whose NIC
// requests use a DeviceClass per pool.

// draClaimName is the pod's name for its claim (spec.resourceClaims[].name).
const draClaimName = "devices"

// DeviceClassName is the name of the rendered DeviceClass of a pool
// resource: rdmanet.io/sriov_rdma → sriov-rdma.rdmanet.io, the way
// deploy/dra names sriov-rdma.example.com after example.com/sriov_rdma.
func DeviceClassName(resource string) string {
	prefix, name, ok := strings.Cut(resource, "/")
	if !ok {
		name, prefix = resource, ""
	}
	n := strings.ToLower(strings.NewReplacer("_", "-", ".", "-").Replace(name))
	if prefix == "" {
		return n
	}
	return n + "." + strings.ToLower(prefix)
}

// deviceClassSelector is the CEL expression of a pool's class.
func deviceClassSelector(kind, resource string) string {
	// One condition a line: YAML writes it as a literal block.
	return fmt.Sprintf("device.driver == %q &&\ndevice.attributes[%q].kind == %q &&\ndevice.attributes[\"k8s.cni.cncf.io\"].resourceName == %q",
		DRADriver, DRADriver, kind, resource)
}

func deviceClasses(s Spec, rs []rail) []Document {
	if !s.DRA {
		return nil
	}
	var out []Document
	for _, r := range rs {
		res := r.resource(s)
		out = append(out, Document{
			fmt.Sprintf("DRA device class of pool %s: %s devices of driver %s whose k8s.cni.cncf.io/resourceName is the pool's (the NAD's resourceName)", res, s.Mode, DRADriver),
			obj{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
				"metadata": obj{"name": DeviceClassName(res)},
				"spec":     obj{"selectors": []any{obj{"cel": obj{"expression": deviceClassSelector(s.Mode, res)}}}}},
		})
	}
	return out
}

func claimTemplateName(s Spec) string { return s.Name + "-devices" }

// draPairs is the number of GPU+NIC pairs aligned on the PCIe root: one per
// rail, as long as there are GPUs.
func draPairs(s Spec, rs []rail) int { return min(s.GPUsPerNode, len(rs)) }

func claimTemplateComment(s Spec, rs []rail) string {
	pairs := draPairs(s, rs)
	if pairs == 0 {
		return fmt.Sprintf("DRA claim template: one %s NIC request per rail", s.Mode)
	}
	c := fmt.Sprintf("DRA claim template: %d GPU+NIC pair(s), each pair under one PCIe root (one matchAttribute %s constraint per pair, never one over count-N requests: that would put all devices under a single root)", pairs, PCIeRootAttribute)
	if rest := s.GPUsPerNode - pairs; rest > 0 {
		c += fmt.Sprintf("; %d more GPU(s) unaligned", rest)
	}
	return c
}

// claimTemplate writes the requests the way examples/dra/gpu-nic-aligned-x8.yaml
// does: gpu-i/nic-i pairs with one constraint each; GPUs beyond the rails in
// one request "gpus"; rails beyond the GPUs as unpaired nic-i.
func claimTemplate(s Spec, rs []rail) obj {
	pairs := draPairs(s, rs)
	var reqs, cons []any
	exactly := func(name, class string, count int) obj {
		e := obj{"deviceClassName": class}
		if count > 1 {
			e["allocationMode"], e["count"] = "ExactCount", count
		}
		return obj{"name": name, "exactly": e}
	}
	for i, r := range rs {
		nic := fmt.Sprintf("nic-%d", i)
		if i < pairs {
			gpu := fmt.Sprintf("gpu-%d", i)
			reqs = append(reqs, exactly(gpu, s.GPUDeviceClass, 1))
			cons = append(cons, obj{"requests": []string{gpu, nic}, "matchAttribute": PCIeRootAttribute})
		}
		reqs = append(reqs, exactly(nic, DeviceClassName(r.resource(s)), 1))
	}
	if rest := s.GPUsPerNode - pairs; rest > 0 {
		reqs = append(reqs, exactly("gpus", s.GPUDeviceClass, rest))
	}
	devices := obj{"requests": reqs}
	if len(cons) > 0 {
		devices["constraints"] = cons
	}
	return obj{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
		"metadata": obj{"name": claimTemplateName(s), "namespace": s.Namespace},
		"spec":     obj{"spec": obj{"devices": devices}}}
}
