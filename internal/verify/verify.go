// Package verify checks a running RDMA training pod layer by layer, the way
// the seeds' verification sections do it by hand:
//
//	node     the node has the RDMA extended resource the pod requests
//	         (capacity, allocatable, allocated to pods on the node)
//	network  the networks annotation's NADs exist and the network-status
//	         annotation names them, with interface, IPs and device-info
//	pod      inside the pod (busybox commands through exec): the training
//	         interface with its addresses, no default route over it, the RDMA
//	         device, /dev/infiniband, the RoCEv2 IPv4 GID, memlock and
//	         CAP_IPC_LOCK, and the NCCL_* environment against all of that
//	nccl     the pod's log: did NCCL use NET/IB (internal/nccl)
//
// Gatherer reads a live cluster into Facts; Run is a pure function over
// Facts, so every check is table-tested with recorded outputs.
package verify

import (
	corev1 "k8s.io/api/core/v1"
)

// Status of a check.
type Status string

const (
	OK      Status = "ok"
	Problem Status = "problem"
	Skip    Status = "skip"
	// Unknown means the check could not be made (API or exec error).
	Unknown Status = "unknown"
)

// Layers, in report order.
const (
	LayerNode    = "node"
	LayerNetwork = "network"
	LayerPod     = "pod"
	LayerNCCL    = "nccl"
)

// Layers lists the layers in report order.
var Layers = []string{LayerNode, LayerNetwork, LayerPod, LayerNCCL}

// Check IDs.
const (
	IDNodeResource     = "node-resource"
	IDNADExists        = "nad-exists"
	IDNADResource      = "nad-resource"
	IDNetworkStatus    = "network-status"
	IDDeviceInfo       = "device-info"
	IDExec             = "exec"
	IDTrainingIf       = "training-interface"
	IDDefaultRoute     = "default-route"
	IDRDMADevice       = "rdma-device"
	IDDevInfiniband    = "dev-infiniband"
	IDRoCEGID          = "roce-gid"
	IDIBPort           = "ib-port"
	IDIBPKey           = "ib-pkey"
	IDMemlock          = "memlock"
	IDCapIPCLock       = "cap-ipc-lock"
	IDNCCLTransport    = "nccl-transport"
	IDNCCLIBHCA        = "nccl-ib-hca"
	IDNCCLSocketIfname = "nccl-socket-ifname"
	IDNCCLGIDIndex     = "nccl-gid-index"
	IDNCCLLog          = "nccl-log"
)

// CheckInfo describes a check of the catalogue.
type CheckInfo struct {
	ID      string
	Layer   string
	Summary string
}

// Catalogue lists every check, in report order.
var Catalogue = []CheckInfo{
	{IDNodeResource, LayerNode, "the node offers the RDMA extended resource the pod requests: capacity, allocatable, allocated (sum over the node's pods)"},
	{IDNADExists, LayerNetwork, "every NetworkAttachmentDefinition of the networks annotation exists"},
	{IDNADResource, LayerNetwork, "the NAD's resourceName annotation is a resource the pod requests (the three-place name match)"},
	{IDNetworkStatus, LayerNetwork, "the network-status annotation names every attached NAD with its interface and IPs"},
	{IDDeviceInfo, LayerNetwork, "exclusive mode: network-status carries the VF's device-info (pci-address, rdma-device)"},
	{IDExec, LayerPod, "the checks inside the pod could run (kubectl exec, busybox sh)"},
	{IDTrainingIf, LayerPod, "the training interface (net1) exists in the pod, is up and has the network-status IPs (an IB-only device has no net1: said so)"},
	{IDDefaultRoute, LayerPod, "the default route is not via the training interface"},
	{IDRDMADevice, LayerPod, "the RDMA device is visible in the pod (/sys/class/infiniband), the VF's own in exclusive mode"},
	{IDDevInfiniband, LayerPod, "/dev/infiniband has the uverbs node(s)"},
	{IDRoCEGID, LayerPod, "RoCE: the GID table has a RoCEv2 IPv4 entry (for net1's address); its index is reported"},
	{IDIBPort, LayerPod, "InfiniBand: the pod's IB port is ACTIVE with a LID and an SM LID (a subnet manager configured it) and a PKey table"},
	{IDIBPKey, LayerPod, "InfiniBand: the PKey of the pod's ib-sriov/ipoib network is in the port's PKey table with full membership"},
	{IDMemlock, LayerPod, "RLIMIT_MEMLOCK (ulimit -l) is unlimited, or CAP_IPC_LOCK lifts it"},
	{IDCapIPCLock, LayerPod, "CAP_IPC_LOCK (bit 14) is in the container's effective capabilities"},
	{IDNCCLTransport, LayerPod, "NCCL_IB_DISABLE / NCCL_NET do not turn RDMA off"},
	{IDNCCLIBHCA, LayerPod, "NCCL_IB_HCA selects RDMA devices the pod has (on InfiniBand networks: the pod's own HCA)"},
	{IDNCCLSocketIfname, LayerPod, "NCCL_SOCKET_IFNAME selects an interface the pod has"},
	{IDNCCLGIDIndex, LayerPod, "NCCL_IB_GID_INDEX is the RoCEv2 IPv4 index found (InfiniBand needs none)"},
	{IDNCCLLog, LayerNCCL, "--nccl-logs: the pod's NCCL_DEBUG=INFO log shows NET/IB, not NET/Socket"},
}

// Check is one outcome.
type Check struct {
	Layer    string `json:"layer"`
	ID       string `json:"check"`
	Status   Status `json:"status"`
	Evidence string `json:"evidence"`
	Fix      string `json:"fix,omitempty"`
}

// Report is the outcome of Run for one pod.
type Report struct {
	Namespace    string   `json:"namespace"`
	Pod          string   `json:"pod"`
	Node         string   `json:"node"`
	Container    string   `json:"container"`
	Mode         string   `json:"mode"`
	ModeEvidence []string `json:"mode_evidence"`
	Checks       []Check  `json:"checks"`
	Summary      Summary  `json:"summary"`
}

// Summary counts the checks; Result is "ok", "problem" or "unknown"
// (a problem wins over an unknown: it is a finding).
type Summary struct {
	OK      int    `json:"ok"`
	Problem int    `json:"problem"`
	Skip    int    `json:"skip"`
	Unknown int    `json:"unknown"`
	Result  string `json:"result"`
}

func (r *Report) summarise() {
	r.Summary = Summary{}
	for _, c := range r.Checks {
		switch c.Status {
		case OK:
			r.Summary.OK++
		case Problem:
			r.Summary.Problem++
		case Skip:
			r.Summary.Skip++
		case Unknown:
			r.Summary.Unknown++
		}
	}
	switch {
	case r.Summary.Problem > 0:
		r.Summary.Result = string(Problem)
	case r.Summary.Unknown > 0:
		r.Summary.Result = string(Unknown)
	default:
		r.Summary.Result = string(OK)
	}
}

// Facts are what the checks look at for one pod. Gatherer fills them from
// a cluster; tests build them from recorded outputs.
type Facts struct {
	Pod *corev1.Pod
	// Container is the container exec'd into and whose logs were read.
	Container string

	// Node is the pod's node (nil when unscheduled or unreadable: NodeErr).
	Node    *corev1.Node
	NodeErr error
	// NodePods are the pods bound to the node (for the allocated sum).
	NodePods    []corev1.Pod
	NodePodsErr error

	// NADs are the NetworkAttachmentDefinitions of the networks
	// annotation, keyed "namespace/name"; a nil value means not found.
	NADs   map[string]*NAD
	NADErr error

	// Exec is the in-pod output, by section (see Sections); ExecErr why
	// there is none.
	Exec    map[string]string
	ExecErr error

	// Logs is the container's log (--nccl-logs); LogsWanted says whether it
	// was asked for.
	LogsWanted bool
	Logs       string
	LogsErr    error
}

// NAD is a NetworkAttachmentDefinition as read from the API server.
type NAD struct {
	Namespace string
	Name      string
	// ResourceName is its k8s.v1.cni.cncf.io/resourceName annotation.
	ResourceName string
	// Raw is the object as JSON (for lint's mode decision).
	Raw []byte
}
