package dra

// The NCCL environment Prepare adds to a claim's CDI spec (docs/dra.md,
// "NCCL environment"): NCCL_IB_HCA naming the RDMA devices of the pod's
// rdmanet claims, NCCL_IB_GID_INDEX with their RoCE v2 IPv4 GID index;
// never a variable a container of the claim sets itself.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/rdmanet/rdmanet/internal/inventory"
)

// The NCCL variables Prepare sets.
const (
	EnvNCCLIBHCA      = "NCCL_IB_HCA"
	EnvNCCLIBGIDIndex = "NCCL_IB_GID_INDEX"
)

// PodGetter reads one pod (the kubelet plugin's pods: get).
type PodGetter interface {
	GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
}

// clientPods is PodGetter over an API client.
type clientPods struct{ c kubernetes.Interface }

func (p clientPods) GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	return p.c.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
}

// gidOf returns the link layer of the RDMA device rdma of function pci
// and, on Ethernet, the GID index NCCL should use: for a shared HCA (in
// the host's namespace, with its address) the index of its RoCE v2 IPv4
// GID now; for an exclusive device (which gets its address in the pod,
// after Prepare) the index its first IPv4 address will get
// (inventory.Port.FirstIPv4GIDIndex). why says why the index is unknown.
func gidOf(node *inventory.Node, pci, rdma string, exclusive bool) (linkLayer string, idx *int, why string) {
	if rdma == "" || node == nil {
		return "", nil, "no RDMA device"
	}
	f := node.Function(pci)
	if f == nil {
		return "", nil, "function not in the inventory"
	}
	for _, r := range f.RDMA {
		if r.Name != rdma {
			continue
		}
		if len(r.Ports) == 0 {
			return "", nil, rdma + " has no port"
		}
		p := r.Ports[0]
		if p.LinkLayer != inventory.LinkEthernet {
			return p.LinkLayer, nil, "not RoCE"
		}
		if exclusive {
			i, err := p.FirstIPv4GIDIndex()
			if err != nil {
				return p.LinkLayer, nil, rdma + ": " + err.Error()
			}
			return p.LinkLayer, &i, ""
		}
		if i, ok := p.RecommendedGIDIndex(); ok {
			return p.LinkLayer, &i, ""
		}
		return p.LinkLayer, nil, rdma + " has no RoCE v2 IPv4 GID (its netdev has no IPv4 address)"
	}
	return "", nil, rdma + " not in the inventory"
}

// podCache reads each pod once per Prepare call.
type podCache struct {
	get  PodGetter
	pods map[types.NamespacedName]podRead
}

type podRead struct {
	pod *corev1.Pod
	err error
}

func (c *podCache) pod(ctx context.Context, key types.NamespacedName) (*corev1.Pod, error) {
	if r, ok := c.pods[key]; ok {
		return r.pod, r.err
	}
	var r podRead
	if c.get == nil {
		r.err = fmt.Errorf("the agent has no API client to read pods")
	} else {
		r.pod, r.err = c.get.GetPod(ctx, key.Namespace, key.Name)
	}
	c.pods[key] = r
	return r.pod, r.err
}

// containerClaims returns, per container of pod (init containers
// included), the ResourceClaims it uses: through resources.claims (the
// pod's spec.resourceClaims entry, a claim of its own or one generated
// from a template, status.resourceClaimStatuses) or as an extended
// resource backed by DRA (status.extendedResourceClaimStatus).
func containerClaims(pod *corev1.Pod) map[string][]string {
	byPodClaim := podClaimNames(pod)
	out := map[string][]string{}
	for _, ctr := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		for _, rc := range ctr.Resources.Claims {
			if n, ok := byPodClaim[rc.Name]; ok && !slices.Contains(out[ctr.Name], n) {
				out[ctr.Name] = append(out[ctr.Name], n)
			}
		}
	}
	if x := pod.Status.ExtendedResourceClaimStatus; x != nil && x.ResourceClaimName != "" {
		for _, m := range x.RequestMappings {
			if !slices.Contains(out[m.ContainerName], x.ResourceClaimName) {
				out[m.ContainerName] = append(out[m.ContainerName], x.ResourceClaimName)
			}
		}
	}
	return out
}

// podClaimNames maps each spec.resourceClaims entry of pod to the
// ResourceClaim it names (its own claim, or the one generated from a
// template, from status.resourceClaimStatuses); entries not resolved yet
// are left out.
func podClaimNames(pod *corev1.Pod) map[string]string {
	out := map[string]string{}
	for i := range pod.Spec.ResourceClaims {
		if n, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i]); err == nil && n != nil {
			out[pod.Spec.ResourceClaims[i].Name] = *n
		}
	}
	return out
}

// containerEnv returns the names a container of pod sets in env.
func containerEnv(pod *corev1.Pod, container string) []string {
	for _, ctr := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		if ctr.Name != container {
			continue
		}
		var out []string
		for _, e := range ctr.Env {
			out = append(out, e.Name)
		}
		return out
	}
	return nil
}

// setNCCLEnv gives each resolved claim its NCCL environment (pc.Env):
//
//   - its group: the claim and every other claim a container using it
//     uses, in any pod the claim is reserved for (the claims of this call,
//     or prepared before and in the checkpoint; claims of other drivers
//     add nothing), so that a multi-rail container gets all its HCAs;
//   - NCCL_IB_HCA: "=" and the group's RDMA devices, sorted, comma-joined
//     (NCCL's exact-match syntax: a plain "mlx5_4" is a prefix that also
//     selects mlx5_40..mlx5_49); none when no device has an RDMA device;
//   - NCCL_IB_GID_INDEX: the one GID index of the group's RoCE devices;
//     none when the group has none, when one is unknown, or when they
//     differ (NCCL takes one index for all devices);
//   - without the variables a container using the claim sets in env: a
//     CDI env edit replaces the container's variable of the same name.
//
// A pod that cannot be read fails the claim (closed): it might set the
// variables. A claim whose group holds a claim of this call that failed
// fails too, so that the specs of one pod's claims agree when kubelet
// retries. Claims and pods not reserved for are not read.
func (d *Driver) setNCCLEnv(ctx context.Context, claims []*resourceapi.ResourceClaim, resolved map[types.UID]*preparedClaim, failed map[types.UID]error, pods *podCache) {
	inCall := map[types.NamespacedName]*resourceapi.ResourceClaim{}
	for _, c := range claims {
		inCall[types.NamespacedName{Namespace: c.Namespace, Name: c.Name}] = c
	}
	envs := map[types.UID][]string{}
	for _, c := range claims {
		pc := resolved[c.UID]
		if pc == nil || !slices.ContainsFunc(pc.Devices, func(dev preparedDevice) bool { return dev.RDMA != "" }) {
			continue
		}
		env, err := d.claimNCCLEnv(ctx, c, pods, inCall, resolved, failed)
		if err != nil {
			failed[c.UID] = err
			continue
		}
		envs[c.UID] = env
	}
	for uid, env := range envs {
		if failed[uid] == nil {
			resolved[uid].Env = env
		}
	}
}

// claimNCCLEnv is setNCCLEnv for one claim.
func (d *Driver) claimNCCLEnv(ctx context.Context, c *resourceapi.ResourceClaim, pods *podCache, inCall map[types.NamespacedName]*resourceapi.ResourceClaim,
	resolved map[types.UID]*preparedClaim, failed map[types.UID]error) ([]string, error) {
	name := c.Namespace + "/" + c.Name
	group := []string{c.Name}
	userSet := map[string]string{} // variable → the container setting it
	for _, ref := range c.Status.ReservedFor {
		if ref.APIGroup != "" || ref.Resource != "pods" {
			d.log.Info("NCCL environment: claim reserved for a consumer that is not a pod; its containers' env is not checked",
				"claim", name, "consumer", ref.APIGroup+"/"+ref.Resource+"/"+ref.Name)
			continue
		}
		key := types.NamespacedName{Namespace: c.Namespace, Name: ref.Name}
		pod, err := pods.pod(ctx, key)
		if apierrors.IsNotFound(err) || (err == nil && pod.UID != ref.UID) {
			d.log.Info("NCCL environment: a pod the claim is reserved for is gone", "claim", name, "pod", key.String())
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("claim %s: cannot read pod %s, which the claim is reserved for, to leave out the NCCL variables its containers set themselves: %w; "+
				"fix: grant the agent's identity get on pods (ClusterRole rdmanet-dra-publisher, deploy/dra/rbac-dra.yaml), or run the agent with --dra-nccl-env=false; kubelet retries this claim",
				name, key, err)
		}
		for ctr, used := range containerClaims(pod) {
			if !slices.Contains(used, c.Name) {
				continue
			}
			for _, n := range used {
				if !slices.Contains(group, n) {
					group = append(group, n)
				}
			}
			for _, v := range containerEnv(pod, ctr) {
				if v == EnvNCCLIBHCA || v == EnvNCCLIBGIDIndex {
					userSet[v] = key.String() + " container " + ctr
				}
			}
		}
	}
	var devs []preparedDevice
	for _, n := range group {
		key := types.NamespacedName{Namespace: c.Namespace, Name: n}
		if o := inCall[key]; o != nil && d.cp.Claims[o.UID] == nil {
			if err := failed[o.UID]; err != nil {
				return nil, fmt.Errorf("claim %s: not prepared, since claim %s, used by the same container, was not: %w; kubelet retries both", name, key, err)
			}
			devs = append(devs, resolved[o.UID].Devices...)
			continue
		}
		for _, pc := range d.cp.Claims {
			if pc.Namespace == key.Namespace && pc.Name == key.Name {
				devs = append(devs, pc.Devices...)
			}
		}
	}

	var env []string
	var hcas []string
	for _, dev := range devs {
		if dev.RDMA != "" && !slices.Contains(hcas, dev.RDMA) {
			hcas = append(hcas, dev.RDMA)
		}
	}
	slices.Sort(hcas)
	if by, ok := userSet[EnvNCCLIBHCA]; ok {
		d.log.Info("NCCL environment: "+EnvNCCLIBHCA+" left to the pod, which sets it", "claim", name, "set_by", by)
	} else if len(hcas) > 0 {
		env = append(env, EnvNCCLIBHCA+"=="+strings.Join(hcas, ","))
	}
	idx, why := groupGIDIndex(devs)
	switch by, ok := userSet[EnvNCCLIBGIDIndex]; {
	case ok:
		d.log.Info("NCCL environment: "+EnvNCCLIBGIDIndex+" left to the pod, which sets it", "claim", name, "set_by", by)
	case idx != nil:
		env = append(env, EnvNCCLIBGIDIndex+"="+strconv.Itoa(*idx))
	case why != "":
		d.log.Warn("NCCL environment: "+EnvNCCLIBGIDIndex+" not set", "claim", name, "reason", why)
	}
	return env, nil
}

// groupGIDIndex returns the GID index all RoCE devices of devs share, or
// why there is none to give ("" when there is no RoCE device: InfiniBand
// needs none).
func groupGIDIndex(devs []preparedDevice) (*int, string) {
	var idxs []int
	var seen []string
	for _, dev := range devs {
		if dev.RDMA == "" || dev.LinkLayer == inventory.LinkInfiniBand {
			continue
		}
		switch {
		case dev.LinkLayer == "":
			return nil, dev.RDMA + ": link layer not recorded (prepared by an older agent)"
		case dev.GIDIndex == nil:
			if dev.gidWhy != "" {
				return nil, dev.gidWhy
			}
			return nil, dev.RDMA + ": GID index unknown"
		}
		idxs = append(idxs, *dev.GIDIndex)
		seen = append(seen, fmt.Sprintf("%s: %d", dev.RDMA, *dev.GIDIndex))
	}
	if len(idxs) == 0 {
		return nil, ""
	}
	if slices.Min(idxs) != slices.Max(idxs) {
		return nil, "the devices' GID indexes differ (" + strings.Join(seen, ", ") + ") and NCCL takes one for all; fix: set " + EnvNCCLIBGIDIndex + " in the pod, or claim devices with one index"
	}
	return &idxs[0], ""
}
