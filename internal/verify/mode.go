package verify

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/rdmanet/rdmanet/internal/lint"
	"github.com/rdmanet/rdmanet/internal/manifest"
)

// Modes, as lint decides them.
const (
	ModeExclusive = lint.ModeExclusive
	ModeShared    = lint.ModeShared
	ModeHost      = lint.ModeHost
	ModeTCP       = lint.ModeTCP
	ModeUnknown   = lint.ModeUnknown
)

// DetectMode decides the pod's RDMA mode through lint's rule engine (the
// same decision `kubectl rdma lint` and the admission webhook make) over the
// live pod and the NADs that exist.
func DetectMode(pod *corev1.Pod, nads map[string]*NAD) (string, []string, error) {
	p := pod.DeepCopy()
	p.APIVersion, p.Kind = "v1", "Pod"
	p.ManagedFields = nil
	p.Status = corev1.PodStatus{}
	b, err := json.Marshal(p)
	if err != nil {
		return ModeUnknown, nil, fmt.Errorf("pod %s/%s: encode for lint: %w", pod.Namespace, pod.Name, err)
	}
	objs, err := manifest.Parse("pod "+pod.Namespace+"/"+pod.Name, b)
	if err != nil || len(objs) != 1 {
		return ModeUnknown, nil, fmt.Errorf("pod %s/%s: decode for lint: %w (%d objects)", pod.Namespace, pod.Name, err, len(objs))
	}
	var ctx []*manifest.Object
	for _, k := range slices.Sorted(maps.Keys(nads)) {
		n := nads[k]
		if n == nil || len(n.Raw) == 0 {
			continue
		}
		os, err := manifest.Parse("NetworkAttachmentDefinition "+k, n.Raw)
		if err != nil {
			return ModeUnknown, nil, fmt.Errorf("NetworkAttachmentDefinition %s: decode for lint: %w", k, err)
		}
		ctx = append(ctx, os...)
	}
	res, err := lint.LintPod(objs[0], ctx)
	if err != nil {
		return ModeUnknown, nil, fmt.Errorf("pod %s/%s: lint: %w", pod.Namespace, pod.Name, err)
	}
	return res.Mode, res.Evidence, nil
}

// Selections are the pod's networks annotation, parsed, with namespaces
// filled in.
func Selections(pod *corev1.Pod) ([]manifest.NetworkSelection, error) {
	v, ok := pod.Annotations[manifest.NetworksAnnotation]
	if !ok || strings.TrimSpace(v) == "" {
		return nil, nil
	}
	sels, err := manifest.ParseNetworks(manifest.NetworksAnnotation, v)
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: annotation %s: %w", pod.Namespace, pod.Name, manifest.NetworksAnnotation, err)
	}
	for i := range sels {
		if sels[i].Namespace == "" {
			sels[i].Namespace = pod.Namespace
		}
	}
	return sels, nil
}

// PickContainer is the container to exec into: the first that requests an
// RDMA resource (by lint's naming conventions, or one of resources), else
// the first with NCCL_* settings, else the first.
func PickContainer(pod *corev1.Pod, resources []string) string {
	if len(pod.Spec.Containers) == 0 {
		return ""
	}
	for _, c := range pod.Spec.Containers {
		if len(rdmaLimits(c, resources)) > 0 {
			return c.Name
		}
	}
	for _, c := range pod.Spec.Containers {
		for _, e := range c.Env {
			if strings.HasPrefix(e.Name, "NCCL_") {
				return c.Name
			}
		}
	}
	return pod.Spec.Containers[0].Name
}

// rdmaLimits are the container's RDMA extended resources with their limit.
func rdmaLimits(c corev1.Container, extra []string) map[string]int64 {
	out := map[string]int64{}
	for name, q := range c.Resources.Limits {
		n := string(name)
		if lint.IsRDMAResource(n) || contains(extra, n) {
			out[n] = q.Value()
		}
	}
	return out
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
