package lint

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/rdmanet/rdmanet/internal/manifest"
)

// inputIndex holds every object of one lint run, indexed for cross-object checks.
type inputIndex struct {
	objs      []*manifest.Object
	workloads []*workload
	nads      []*manifest.NAD
	pools     []*manifest.Pool
	poolErrs  []*manifest.PoolConfigError
	services  []*service
	classes   map[string]*draClass // DeviceClasses of the input by name
	claims    []*draClaim          // ResourceClaims and ResourceClaimTemplates
}

type service struct {
	obj  *manifest.Object
	spec corev1.ServiceSpec
}

func index(objs []*manifest.Object) (*inputIndex, error) {
	in := &inputIndex{objs: objs}
	for _, o := range objs {
		in.nads = append(in.nads, manifest.NADFromObject(o)...)
		p, e := manifest.PoolsFromObject(o)
		in.pools = append(in.pools, p...)
		in.poolErrs = append(in.poolErrs, e...)
		if o.Kind == "Service" && o.Group() == "" {
			var s corev1.Service
			if err := manifest.Decode(o, &s); err != nil {
				return nil, err
			}
			in.services = append(in.services, &service{obj: o, spec: s.Spec})
		}
	}
	if err := in.indexDRA(); err != nil {
		return nil, err
	}
	for _, o := range objs {
		tmpls, err := manifest.PodTemplates(o)
		if err != nil {
			return nil, err
		}
		for i := range tmpls {
			in.workloads = append(in.workloads, newWorkload(in, &tmpls[i]))
		}
	}
	return in, nil
}

// nsMatch compares namespaces where "" means "not given" and matches any.
func nsMatch(a, b string) bool { return a == "" || b == "" || a == b }

// findNAD resolves a network selection from a pod in namespace podNS.
// It returns the NAD, or nil plus the NADs of that name in other namespaces.
func (in *inputIndex) findNAD(sel manifest.NetworkSelection, podNS string) (*manifest.NAD, []*manifest.NAD) {
	ns := sel.Namespace
	if ns == "" {
		ns = podNS
	}
	var other []*manifest.NAD
	for _, n := range in.nads {
		if n.Name != sel.Name {
			continue
		}
		if nsMatch(n.Namespace, ns) {
			return n, nil
		}
		other = append(other, n)
	}
	return nil, other
}

// configMapData returns the data of a ConfigMap in the input (nil if absent).
func (in *inputIndex) configMapData(name, ns string) map[string]string {
	for _, o := range in.objs {
		if o.Kind == "ConfigMap" && o.Group() == "" && o.Name == name && nsMatch(o.Namespace, ns) {
			data, _ := o.Data["data"].(map[string]any)
			out := map[string]string{}
			for k, v := range data {
				if s, ok := v.(string); ok {
					out[k] = s
				}
			}
			return out
		}
	}
	return nil
}

func (in *inputIndex) poolsNamed(full string) []*manifest.Pool {
	var out []*manifest.Pool
	for _, p := range in.pools {
		if p.FullName() == full {
			out = append(out, p)
		}
	}
	return out
}

func (in *inputIndex) findService(name, ns string) *service {
	for _, s := range in.services {
		if s.obj.Name == name && nsMatch(s.obj.Namespace, ns) {
			return s
		}
	}
	return nil
}

// poolKind tells what a pool-defined resource is; for resources without a
// pool in the input it falls back to the naming conventions of the seeds.
func (in *inputIndex) resourceKind(name string) (kind string, pool *manifest.Pool) {
	if ps := in.poolsNamed(name); len(ps) > 0 {
		return string(ps[0].Kind), ps[0]
	}
	return guessResourceKind(name), nil
}

// Resource kinds.
const (
	resExclusive = "exclusive"
	resShared    = "shared"
	resRDMA      = "rdma" // RDMA, model unknown
	resGPU       = "gpu"
	resOther     = "other"
)

// guessResourceKind classifies an extended resource by name, following the
// names the seeds use: example.com/sriov_rdma and
// tke.cloud.tencent.com/mlnx_sriov_rdma (VF), rdma/vf (VF), rdma/hca_shared_devices_a,
// spidernet.io/hca_shared_devices, tke.cloud.tencent.com/tke-shared-rdma (shared).
func guessResourceKind(name string) string {
	l := strings.ToLower(name)
	switch {
	case l == "nvidia.com/gpu" || strings.HasPrefix(l, "nvidia.com/mig-") || l == "amd.com/gpu" || strings.HasPrefix(l, "gpu.intel.com/"):
		return resGPU
	case strings.Contains(l, "shared") || strings.Contains(l, "hca"):
		return resShared
	case strings.Contains(l, "sriov") || hasToken(l, "vf") || strings.Contains(l, "_vf") || strings.HasSuffix(l, "/vf"):
		return resExclusive
	case strings.HasPrefix(l, manifest.SharedDefaultPrefix+"/"):
		return resShared
	case strings.Contains(l, "rdma") || strings.Contains(l, "roce") || strings.Contains(l, "infiniband"):
		return resRDMA
	}
	return resOther
}

func hasToken(s, tok string) bool {
	f := strings.FieldsFunc(s, func(r rune) bool { return r == '/' || r == '_' || r == '-' || r == '.' })
	for _, x := range f {
		if x == tok {
			return true
		}
	}
	return false
}

// isExtendedResource is a resource Kubernetes treats as non-overcommitable
// extended resource (domain-prefixed, outside kubernetes.io).
func isExtendedResource(name string) bool {
	if !strings.Contains(name, "/") {
		return false
	}
	if strings.HasPrefix(name, "kubernetes.io/") || strings.Contains(name, ".kubernetes.io/") || strings.HasPrefix(name, "requests.") {
		return false
	}
	return true
}

// nadKind classifies a NAD's plugin chain.
func nadKind(n *manifest.NAD) string {
	if n == nil || n.Config == nil {
		return ""
	}
	for _, p := range n.Config.Plugins {
		switch p.Type {
		case "sriov", "ib-sriov", "host-device":
			return resExclusive
		case "macvlan", "ipvlan", "ipoib":
			return resShared
		}
	}
	return ""
}

// workloadRef names the owner for messages; roles are shown in fields.
func sortedStrings(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func plural(n int, s string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, s)
	}
	return fmt.Sprintf("%d %ss", n, s)
}
