package lint

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/rdmanet/rdmanet/internal/manifest"
)

// gang-scheduling markers on pods or their owner.
var gangSchedulers = map[string]bool{"volcano": true, "kube-batch": true, "scheduler-plugins-scheduler": true, "yunikorn": true}

var gangMarkers = []string{
	"scheduling.k8s.io/group-name",        // Volcano PodGroup
	"scheduling.x-k8s.io/pod-group",       // coscheduling
	"pod-group.scheduling.sigs.k8s.io",    // coscheduling (old)
	"kueue.x-k8s.io/queue-name",           // Kueue
	"yunikorn.apache.org/task-group-name", // YuniKorn
	"scheduling.volcano.sh/group-name",
}

// podCount is the number of pods the template stands for (0 = unknown).
func (w *workload) podCount() int {
	return w.t.Replicas
}

func hasMarker(maps ...map[string]string) bool {
	for _, m := range maps {
		for _, k := range gangMarkers {
			if _, ok := m[k]; ok {
				return true
			}
		}
	}
	return false
}

// RDMA041, RDMA085, RDMA086, RDMA087
func (c *checker) checkScheduling(w *workload) {
	// RDMA041: overlapping rails.
	type rail struct {
		net  *net.IPNet
		name string
	}
	var rails []rail
	for _, n := range w.nets {
		if n.nad == nil || n.nad.Config == nil {
			continue
		}
		for _, p := range n.nad.Config.Plugins {
			if !ifacePlugins[p.Type] {
				continue
			}
			for _, ipn := range ipamCIDRs(n.nad.Name, p.IPAM()) {
				rails = append(rails, rail{net: ipn, name: fmt.Sprintf("%s@%s (%s)", n.nad.Name, n.sel.Interface, ipn)})
			}
		}
	}
	for i := 0; i < len(rails); i++ {
		for j := i + 1; j < len(rails); j++ {
			a, b := rails[i].net, rails[j].net
			if a.Contains(b.IP) || b.Contains(a.IP) {
				c.add("RDMA041", w.obj, w.netField, fmt.Sprintf("rails %s and %s share address space; interfaces in one subnet answer each other's ARP (ARP flux) and RDMA sessions can bind to the wrong NIC", rails[i].name, rails[j].name), "")
			}
		}
	}

	if !w.isRDMA() {
		return
	}
	n := w.podCount()
	// Training-shaped core kinds; operator CRDs gang-schedule through their
	// operator, Deployments are services, not collectives.
	training := (w.obj.Group() == "batch" && (w.obj.Kind == "Job" || w.obj.Kind == "CronJob")) || (w.obj.Group() == "apps" && w.obj.Kind == "StatefulSet")
	if n > 1 && training {
		sched := w.t.Spec.SchedulerName
		if !gangSchedulers[sched] && !hasMarker(w.t.Meta.Annotations, w.t.Meta.Labels, w.obj.Labels, w.obj.Annotations) {
			c.add("RDMA085", w.obj, w.t.Field("spec.schedulerName"), fmt.Sprintf("%d pods must all run for training to progress, but scheduler %q admits them one by one; partially started jobs hold GPUs and RDMA devices and can deadlock each other", n, cmp.Or(sched, "default-scheduler")), "")
		}
		if !spreadsByHost(w.t.Spec) {
			c.add("RDMA086", w.obj, w.t.Field("spec.affinity"), fmt.Sprintf("%d replicas and no required podAntiAffinity or DoNotSchedule spread on kubernetes.io/hostname: two members may land on one node and share its NIC", n), fmt.Sprintf("add spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution with labelSelector.matchLabels %s and topologyKey kubernetes.io/hostname", labelString(w.t.Meta.Labels)))
		}
	}
	if w.hostNetwork() {
		for _, o := range w.in.objs {
			if o.Kind != "NetworkPolicy" || o.Group() != "networking.k8s.io" || !nsMatch(o.Namespace, w.ns) {
				continue
			}
			var np networkingv1.NetworkPolicy
			if manifest.Decode(o, &np) != nil {
				continue
			}
			if selectorMatches(np.Spec.PodSelector.MatchLabels, w.t.Meta.Labels) && len(np.Spec.PodSelector.MatchExpressions) == 0 {
				c.add("RDMA087", o, "spec.podSelector", fmt.Sprintf("NetworkPolicy %s selects the hostNetwork pods of %s; policies match pod IPs and a hostNetwork pod's IP is the node's, so it does not isolate them", o.Name, w.obj.Ref()), "")
			}
		}
	}
}

func selectorMatches(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func spreadsByHost(spec corev1.PodSpec) bool {
	if a := spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			if t.TopologyKey == "kubernetes.io/hostname" {
				return true
			}
		}
	}
	for _, t := range spec.TopologySpreadConstraints {
		if t.TopologyKey == "kubernetes.io/hostname" && t.WhenUnsatisfiable == corev1.DoNotSchedule && t.MaxSkew == 1 {
			return true
		}
	}
	return false
}

// RDMA088
func (c *checker) checkClusterPolicy() {
	c.cur = -1
	gpuRDMA := false
	for _, w := range c.in.workloads {
		if w.isRDMA() && w.gpus() > 0 {
			gpuRDMA = true
		}
	}
	if !gpuRDMA {
		return
	}
	for _, o := range c.in.objs {
		if o.Kind != "ClusterPolicy" || o.Group() != "nvidia.com" {
			continue
		}
		if v, _ := manifest.Get(o.Data, "spec.driver.rdma.enabled"); v != true {
			c.add("RDMA088", o, "spec.driver.rdma.enabled", fmt.Sprintf("ClusterPolicy %s does not set spec.driver.rdma.enabled: true, but the input has RDMA GPU workloads; without nvidia-peermem NCCL moves data through host memory (no /GDRDMA)", cmp.Or(o.Name, "<unnamed>")), "")
		}
	}
}

func labelString(m map[string]string) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, k+": "+v)
	}
	slices.Sort(parts)
	return "{" + strings.Join(parts, ", ") + "}"
}
