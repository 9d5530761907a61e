package verify

// Run, the checker every layer's checks share, and their common helpers.

import (
	"encoding/json"
	"fmt"
	"strings"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/rdmanet/rdmanet/internal/lint"
	"github.com/rdmanet/rdmanet/internal/manifest"
)

// NetworkStatusAnnotation is the Multus network-status annotation.
const NetworkStatusAnnotation = "k8s.v1.cni.cncf.io/network-status"

// Run performs every check over f. It does no I/O.
func Run(f *Facts) *Report {
	c := &checker{f: f, pod: f.Pod}
	c.rep = &Report{Namespace: c.pod.Namespace, Pod: c.pod.Name, Node: c.pod.Spec.NodeName, Container: f.Container, ModeEvidence: []string{}, Checks: []Check{}}
	c.prepare()
	c.node()
	c.network()
	c.inPod()
	c.ncclLog()
	c.rep.summarise()
	return c.rep
}

type checker struct {
	f    *Facts
	pod  *corev1.Pod
	rep  *Report
	mode string

	sels    []manifest.NetworkSelection
	selsErr error
	// status is the parsed network-status annotation.
	status    []nadv1.NetworkStatus
	statusErr error
	// trainIfs are the in-pod names of the secondary networks.
	trainIfs []string
	// trainIPs are the IPs network-status gives them.
	trainIPs map[string][]string
	// rdmaDev is the device-info's rdma-device (exclusive mode).
	rdmaDev string
	// resources are the RDMA resources the pod's containers request.
	resources map[string]int64
	// ibNets are the pod's InfiniBand networks (ib-sriov, ipoib NADs);
	// ibOnly the attachments that are an RDMA device without netdev
	// (network-status names them after the device).
	ibNets []ibNet
	ibOnly map[string]bool
	// allIB is set when every port NCCL would use is InfiniBand (no GID
	// index is needed).
	allIB bool

	view *PodView
}

func (c *checker) add(layer, id string, st Status, evidence, fix string) {
	if st == OK || st == Skip {
		fix = ""
	}
	c.rep.Checks = append(c.rep.Checks, Check{Layer: layer, ID: id, Status: st, Evidence: evidence, Fix: fix})
}

func (c *checker) host() bool { return c.pod.Spec.HostNetwork }

func (c *checker) podRef() string { return c.pod.Namespace + "/" + c.pod.Name }

func (c *checker) prepare() {
	mode, ev, err := DetectMode(c.pod, c.f.NADs)
	if err != nil {
		ev = append(ev, err.Error())
	}
	c.mode = mode
	c.rep.Mode = mode
	if ev != nil {
		c.rep.ModeEvidence = ev
	}
	c.sels, c.selsErr = Selections(c.pod)
	c.trainIPs = map[string][]string{}
	c.ibOnly = map[string]bool{}
	if v, ok := c.pod.Annotations[NetworkStatusAnnotation]; ok {
		if err := json.Unmarshal([]byte(v), &c.status); err != nil {
			c.statusErr = fmt.Errorf("annotation %s: %w", NetworkStatusAnnotation, err)
		}
	}
	for _, s := range c.sels {
		ifn := s.Interface
		key := s.Namespace + "/" + s.Name
		ibn, isIB := ibNetwork(key, c.f.NADs[key])
		if isIB {
			c.ibNets = append(c.ibNets, ibn)
		}
		if st := c.statusOf(s); st != nil {
			if st.Interface != "" {
				ifn = st.Interface
			}
			c.trainIPs[ifn] = st.IPs
			dev := ""
			if st.DeviceInfo != nil && st.DeviceInfo.Pci != nil {
				dev = st.DeviceInfo.Pci.RdmaDevice
				if c.rdmaDev == "" {
					c.rdmaDev = dev
				}
			}
			if isIB && ibOnlyIf(st.Interface, st.IPs, dev) {
				c.ibOnly[ifn] = true
			}
		}
		if ifn != "" && !contains(c.trainIfs, ifn) {
			c.trainIfs = append(c.trainIfs, ifn)
		}
	}
	var nadRes []string
	for _, n := range c.f.NADs {
		if n != nil && n.ResourceName != "" {
			nadRes = append(nadRes, n.ResourceName)
		}
	}
	c.resources = map[string]int64{}
	for _, ctr := range c.pod.Spec.Containers {
		for k, v := range rdmaLimits(ctr, nadRes) {
			c.resources[k] += v
		}
	}
	if c.f.ExecErr == nil && c.f.Exec != nil {
		c.view = ParsePodView(c.f.Exec)
	}
}

func (c *checker) statusOf(s manifest.NetworkSelection) *nadv1.NetworkStatus {
	var ibOnly *nadv1.NetworkStatus
	for i := range c.status {
		st := &c.status[i]
		if st.Name == s.Namespace+"/"+s.Name || (st.Name == s.Name && s.Namespace == c.pod.Namespace) {
			if s.InterfaceExplicit && st.Interface != "" && st.Interface != s.Interface {
				// an IB-only attachment is named after its RDMA device,
				// whatever interface the annotation asked for
				if ibOnly == nil && len(st.IPs) == 0 && lint.IsVerbsDeviceName(st.Interface) {
					ibOnly = st
				}
				continue
			}
			return st
		}
	}
	return ibOnly
}

func (c *checker) secondary() bool { return !c.host() && len(c.sels) > 0 }

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// draClaims lists the ResourceClaims the pod's status names: its own and
// template-generated ones, and the one kube-scheduler made for extended
// resources served through DRA.
func draClaims(pod *corev1.Pod) []string {
	var out []string
	for _, st := range pod.Status.ResourceClaimStatuses {
		if st.ResourceClaimName != nil && *st.ResourceClaimName != "" {
			out = append(out, *st.ResourceClaimName)
		}
	}
	if x := pod.Status.ExtendedResourceClaimStatus; x != nil && x.ResourceClaimName != "" {
		out = append(out, x.ResourceClaimName)
	}
	return out
}
