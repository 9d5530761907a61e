// Package render turns a short spec (mode, pool, PFs, subnet, image, nodes ×
// GPUs) into the full manifest set of a mode, laid out as the seed documents
// lay them out: the device plugin pool config, the NetworkAttachmentDefinition
// (exclusive: sriov → rdma chain; shared: macvlan), the headless rendezvous
// Service and the Indexed Job with the networks annotation, resources,
// IPC_LOCK, NCCL environment and dnsPolicy. With DRA (exclusive, shared) the
// Job takes its NICs and GPUs from a ResourceClaimTemplate instead of device
// plugin limits, next to a DeviceClass per pool. Rendered output passes
// `kubectl rdma lint` with nothing above info.
package render

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/rdmanet/rdmanet/internal/inventory"
)

// Modes.
const (
	ModeExclusive = "exclusive"
	ModeShared    = "shared"
	ModeHost      = "host"
)

// DRA names (docs/dra.md).
const (
	// DRADriver is rdmanet's DRA driver: what the rendered DeviceClasses select.
	DRADriver = "rdma.rdmanet.io"
	// DefaultGPUDeviceClass is NVIDIA's DRA GPU class.
	DefaultGPUDeviceClass = "gpu.nvidia.com"
	// PCIeRootAttribute is the standard attribute GPU and NIC are aligned on.
	PCIeRootAttribute = "resource.kubernetes.io/pcieRoot"
)

// Link types (Spec.LinkType): the bearer of the PFs.
const (
	LinkEthernet   = "ethernet"
	LinkInfiniBand = "infiniband"
)

// Pool formats for the shared pool.
const (
	PoolConfigMap        = "configmap"
	PoolNicClusterPolicy = "nicclusterpolicy"
)

// Spec is the input of render. Zero values are defaulted by Default.
type Spec struct {
	Mode      string `json:"mode"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`

	// Device plugin pool.
	ResourcePrefix string   `json:"resourcePrefix,omitempty"`
	ResourceName   string   `json:"resourceName,omitempty"`
	PFNames        []string `json:"pfNames"`
	Vendors        []string `json:"vendors,omitempty"`
	DeviceIDs      []string `json:"deviceIDs,omitempty"`
	RdmaHcaMax     int      `json:"rdmaHcaMax,omitempty"` // shared and host
	PoolFormat     string   `json:"poolFormat,omitempty"` // shared/host: configmap (default) or nicclusterpolicy
	PoolNamespace  string   `json:"poolNamespace,omitempty"`

	// LinkType is the PFs' link layer: ethernet (RoCE, the default) or
	// infiniband. On InfiniBand exclusive mode renders an ib-sriov network
	// (pkey, link_state, the infinibandGUID capability) and shared mode an
	// ipoib child of the IB port; the pools select IB functions
	// (linkTypes).
	LinkType string `json:"linkType,omitempty"`
	// PKey is the InfiniBand partition of the network (0x8005); empty:
	// the default partition (shared: the master's).
	PKey string `json:"pkey,omitempty"`

	// Secondary network (exclusive, shared).
	Network   string   `json:"network,omitempty"` // NAD name
	Interface string   `json:"interface,omitempty"`
	Subnet    string   `json:"subnet,omitempty"`
	Exclude   []string `json:"exclude,omitempty"`
	// Subnets, one per PF, renders a multi-rail job: rail i is PF i with its
	// own pool (<resourceName>_<i>), NAD (<network>-<i>), subnet and
	// interface (net<i+1>). Exclusive and shared modes.
	Subnets []string `json:"subnets,omitempty"`
	VLAN    int      `json:"vlan,omitempty"` // exclusive only
	MTU     int      `json:"mtu,omitempty"`  // shared (macvlan)

	// Workload.
	Image        string   `json:"image"`
	Nodes        int      `json:"nodes,omitempty"`
	GPUsPerNode  int      `json:"gpusPerNode,omitempty"`
	RDMAPerPod   int      `json:"rdmaPerPod,omitempty"`
	Port         int      `json:"port,omitempty"`
	Script       string   `json:"script,omitempty"`
	Command      []string `json:"command,omitempty"`
	SocketIfname string   `json:"socketIfname,omitempty"` // host mode: the node interface for NCCL bootstrap
	NCCLDebug    bool     `json:"ncclDebug,omitempty"`

	// DRA renders the Dynamic Resource Allocation path (exclusive, shared):
	// a DeviceClass per pool of rdmanet's driver, a ResourceClaimTemplate
	// (GPU+NIC pairs aligned on resource.kubernetes.io/pcieRoot) and a Job
	// that takes its NICs and GPUs from the claim instead of device plugin
	// limits. See docs/dra.md, "Tooling".
	DRA bool `json:"dra,omitempty"`
	// GPUDeviceClass is the DeviceClass of the GPU requests with DRA
	// (default gpu.nvidia.com, NVIDIA's DRA driver).
	GPUDeviceClass string `json:"gpuDeviceClass,omitempty"`
}

// ParseSpec reads a YAML or JSON spec strictly (unknown fields are errors).
func ParseSpec(data []byte) (Spec, error) {
	var s Spec
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		return s, fmt.Errorf("render spec: %w", err)
	}
	return s, nil
}

// Default fills the zero fields.
func (s *Spec) Default() {
	if s.Namespace == "" {
		s.Namespace = "default"
	}
	if s.ResourcePrefix == "" {
		s.ResourcePrefix = "rdmanet.io"
	}
	if s.ResourceName == "" {
		if s.Mode == ModeExclusive {
			s.ResourceName = "sriov_rdma"
		} else {
			s.ResourceName = "hca_shared"
		}
	}
	if len(s.Vendors) == 0 {
		s.Vendors = []string{"15b3"}
	}
	if s.RdmaHcaMax == 0 {
		s.RdmaHcaMax = 63
	}
	if s.PoolFormat == "" {
		s.PoolFormat = PoolConfigMap
	}
	if s.PoolNamespace == "" {
		s.PoolNamespace = "kube-system"
	}
	if s.Network == "" && s.Name != "" {
		s.Network = s.Name + "-rdma"
	}
	if s.Interface == "" {
		s.Interface = "net1"
	}
	if s.LinkType == "" {
		s.LinkType = LinkEthernet
	}
	if s.MTU == 0 && s.Mode == ModeShared && !s.IB() {
		s.MTU = 9000
	}
	if s.Nodes == 0 {
		s.Nodes = 2
	}
	if s.GPUsPerNode == 0 {
		s.GPUsPerNode = 8
	}
	if s.RDMAPerPod == 0 {
		s.RDMAPerPod = 1
	}
	if s.Port == 0 {
		s.Port = 29400
	}
	if s.Script == "" {
		s.Script = "/workspace/train.py"
	}
	if s.GPUDeviceClass == "" && s.DRA {
		s.GPUDeviceClass = DefaultGPUDeviceClass
	}
	if s.SocketIfname == "" && s.Mode == ModeHost && len(s.PFNames) > 0 {
		s.SocketIfname = s.PFNames[0]
	}
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
var dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
var resName = regexp.MustCompile(`^[A-Za-z0-9][-A-Za-z0-9_.]*$`)
var ifName = regexp.MustCompile(`^[A-Za-z0-9_.@-]{1,15}$`)

// Validate checks a defaulted spec. Each error names the field, the value,
// the rule and the fix.
func (s *Spec) Validate() error {
	var errs []error
	bad := func(field string, val any, rule, fix string) {
		errs = append(errs, fmt.Errorf("%s %v: %s; %s", field, val, rule, fix))
	}
	switch s.Mode {
	case ModeExclusive, ModeShared, ModeHost:
	default:
		bad("mode", fmt.Sprintf("%q", s.Mode), "must be exclusive, shared or host", "exclusive = one SR-IOV VF per pod, shared = macvlan over a shared HCA, host = hostNetwork")
	}
	if !dnsLabel.MatchString(s.Name) || len(s.Name) > 50 {
		bad("name", fmt.Sprintf("%q", s.Name), "must be a DNS label of at most 50 characters (it names the Job, its pods and the Service)", "use lowercase letters, digits and '-'")
	}
	if !dnsLabel.MatchString(s.Namespace) {
		bad("namespace", fmt.Sprintf("%q", s.Namespace), "must be a DNS label", "use lowercase letters, digits and '-'")
	}
	if !dnsLabel.MatchString(strings.ReplaceAll(s.ResourcePrefix, ".", "-")) || !strings.Contains(s.ResourcePrefix, ".") && s.ResourcePrefix != "rdma" {
		bad("resourcePrefix", fmt.Sprintf("%q", s.ResourcePrefix), "must be a DNS domain (extended resources are <domain>/<name>)", "e.g. rdmanet.io")
	}
	if !resName.MatchString(s.ResourceName) {
		bad("resourceName", fmt.Sprintf("%q", s.ResourceName), "must be a plain name without '/'", "e.g. sriov_rdma")
	}
	if len(s.PFNames) == 0 {
		bad("pfNames", "[]", "at least one PF (the RDMA NIC's netdev on the nodes) is required", "list it, e.g. --pf enp65s0f0np0 (see ibdev2netdev on a node)")
	}
	for _, pf := range s.PFNames {
		if !ifName.MatchString(pf) {
			bad("pfNames", fmt.Sprintf("%q", pf), "is not a network interface name", "use the netdev name from ibdev2netdev")
		}
		if strings.HasPrefix(pf, "ib") && s.Mode == ModeShared && !s.IB() {
			bad("pfNames", fmt.Sprintf("%q", pf), "looks like an IPoIB interface; macvlan cannot use InfiniBand as parent (seed 3, 四)", "on InfiniBand render --link-type infiniband (an ipoib child of the port), or use a RoCE PF")
		}
	}
	if s.Mode == ModeShared && len(s.PFNames) > 1 && len(s.Subnets) == 0 {
		bad("pfNames", s.PFNames, "shared mode renders one macvlan network on one parent", "render one PF, or one rail per PF with subnets (--rail-subnet per PF)")
	}
	if len(s.Subnets) > 0 {
		switch {
		case s.Mode == ModeHost:
			bad("subnets", s.Subnets, "host mode uses the nodes' own interfaces; there are no rails to render", "drop subnets")
		case len(s.Subnets) != len(s.PFNames) || len(s.Subnets) < 2:
			bad("subnets", s.Subnets, fmt.Sprintf("multi-rail needs one subnet per PF (%d PFs) and at least two rails", len(s.PFNames)), "give --rail-subnet once per --pf, in the same order")
		case s.Subnet != "" || len(s.Exclude) > 0:
			bad("subnet", s.Subnet, "subnet/exclude and per-rail subnets are exclusive", "use only subnets")
		}
		for i, sn := range s.Subnets {
			_, a, err := net.ParseCIDR(sn)
			if err != nil {
				bad(fmt.Sprintf("subnets[%d]", i), fmt.Sprintf("%q", sn), "must be a CIDR", "e.g. 10.60.0.0/16")
				continue
			}
			for _, other := range s.Subnets[:i] {
				if _, b, err := net.ParseCIDR(other); err == nil && (a.Contains(b.IP) || b.Contains(a.IP)) {
					bad(fmt.Sprintf("subnets[%d]", i), fmt.Sprintf("%q", sn), "overlaps "+other+"; rails in one subnet cause ARP flux (seed 3, 七)", "give every rail its own subnet")
				}
			}
		}
	}
	if s.Mode != ModeHost {
		if !dnsLabel.MatchString(s.Network) || len(s.Network) > 60 {
			bad("network", fmt.Sprintf("%q", s.Network), "must be a DNS label of at most 60 characters (it names the NetworkAttachmentDefinition)", "e.g. face-training-rdma")
		}
		if s.Interface == "eth0" || !ifName.MatchString(s.Interface) {
			bad("interface", fmt.Sprintf("%q", s.Interface), "must be a free interface name other than eth0 (eth0 is the pod network)", "use net1")
		}
		if len(s.Subnets) > 0 && s.Interface != "net1" {
			bad("interface", fmt.Sprintf("%q", s.Interface), "multi-rail names the rails net1, net2, ...", "leave interface unset")
		}
	}
	if s.Mode != ModeHost && len(s.Subnets) == 0 {
		_, ipnet, err := net.ParseCIDR(s.Subnet)
		if err != nil {
			bad("subnet", fmt.Sprintf("%q", s.Subnet), "must be a CIDR for the training network", "e.g. --subnet 10.60.0.0/16")
		} else {
			for _, ex := range s.Exclude {
				ip, _, err := net.ParseCIDR(ex)
				if err != nil || !ipnet.Contains(ip) {
					bad("exclude", fmt.Sprintf("%q", ex), fmt.Sprintf("must be a CIDR inside subnet %s", s.Subnet), "fix or drop it")
				}
			}
		}
	}
	switch s.LinkType {
	case LinkEthernet, LinkInfiniBand:
	default:
		bad("linkType", fmt.Sprintf("%q", s.LinkType), "must be ethernet or infiniband", "ethernet = RoCE (sriov, macvlan), infiniband = IB (ib-sriov, ipoib)")
	}
	if s.PKey != "" {
		k, err := inventory.ParsePKey(s.PKey)
		switch {
		case !s.IB():
			bad("pkey", fmt.Sprintf("%q", s.PKey), "applies to InfiniBand only (partitions do not exist on RoCE)", "add --link-type infiniband, or drop it")
		case s.Mode == ModeHost:
			bad("pkey", fmt.Sprintf("%q", s.PKey), "host mode has no network to put in a partition (the pod uses the node's ports)", "drop it")
		case err != nil || inventory.CheckPKeyPartition(k) != nil:
			bad("pkey", fmt.Sprintf("%q", s.PKey), "must be a 16-bit hex PKey with a partition number other than 0", "e.g. 0x8005 (the full-membership bit is added)")
		}
	}
	if s.IB() && s.VLAN != 0 {
		bad("vlan", s.VLAN, "InfiniBand VFs have no VLAN (partitions are PKeys)", "drop vlan; give --pkey")
	}
	if s.IB() && s.DRA {
		bad("dra", true, "the InfiniBand variant is rendered for device plugin pools only", "drop --dra for --link-type infiniband")
	}
	if s.VLAN != 0 && (s.Mode != ModeExclusive || s.VLAN < 1 || s.VLAN > 4094) {
		bad("vlan", s.VLAN, "applies to exclusive mode only (the sriov CNI sets it on the VF) and must be 1..4094", "for shared mode put the VLAN interface itself in pfNames")
	}
	switch {
	case s.MTU != 0 && s.IB() && (s.Mode != ModeShared || s.MTU < 1280 || s.MTU > 65520):
		bad("mtu", s.MTU, "applies to shared mode (the IPoIB child) and must be 1280..65520 (datagram mode: at most 4092)", "exclusive VFs take the PF's MTU; leave it unset for the master's")
	case s.MTU != 0 && !s.IB() && (s.Mode != ModeShared || s.MTU < 1280 || s.MTU > 9216):
		bad("mtu", s.MTU, "applies to shared mode (macvlan) and must be 1280..9216", "exclusive VFs take the PF's MTU; drop it")
	}
	if s.Image == "" {
		bad("image", `""`, "is required", "give the training image, e.g. --image registry.example.com/ai/train:v1")
	}
	if s.Nodes < 1 || s.Nodes > 10000 {
		bad("nodes", s.Nodes, "must be 1..10000", "one pod per node")
	}
	if s.GPUsPerNode < 0 || s.GPUsPerNode > 64 {
		bad("gpusPerNode", s.GPUsPerNode, "must be 0..64", "")
	}
	if s.RDMAPerPod < 1 || s.RDMAPerPod > 16 {
		bad("rdmaPerPod", s.RDMAPerPod, "must be 1..16", "")
	}
	if s.Mode != ModeHost && s.RDMAPerPod != 1 {
		bad("rdmaPerPod", s.RDMAPerPod, "each network attachment takes one device", "use 1; for several NICs per pod render one rail per PF (subnets)")
	}
	if s.Port < 1 || s.Port > 65535 {
		bad("port", s.Port, "must be 1..65535", "")
	}
	if s.RdmaHcaMax < 1 || s.RdmaHcaMax > 1000 {
		bad("rdmaHcaMax", s.RdmaHcaMax, "must be 1..1000 (pods sharing one HCA)", "e.g. 63")
	}
	if s.PoolFormat != PoolConfigMap && s.PoolFormat != PoolNicClusterPolicy {
		bad("poolFormat", fmt.Sprintf("%q", s.PoolFormat), "must be configmap or nicclusterpolicy", "")
	}
	if s.PoolFormat == PoolNicClusterPolicy && s.Mode == ModeExclusive {
		bad("poolFormat", s.PoolFormat, "nicclusterpolicy is rendered for the shared pool only", "use configmap")
	}
	if s.DRA && s.Mode == ModeHost {
		bad("dra", true, "host mode has no DRA path: hostNetwork pods take the /dev/infiniband nodes from the shared device plugin pool and no CNI runs for them", "drop --dra, or render --mode exclusive or shared with --dra")
	}
	if s.GPUDeviceClass != "" && (!s.DRA || !dnsSubdomain.MatchString(s.GPUDeviceClass) || len(s.GPUDeviceClass) > 253) {
		bad("gpuDeviceClass", fmt.Sprintf("%q", s.GPUDeviceClass), "must be a DeviceClass name (DNS subdomain) and applies with dra only", "e.g. gpu.nvidia.com, with --dra")
	}
	if s.Mode == ModeHost && !ifName.MatchString(s.SocketIfname) {
		bad("socketIfname", fmt.Sprintf("%q", s.SocketIfname), "must name the node interface NCCL bootstraps on", "")
	}
	return errors.Join(errs...)
}

// IB tells whether the spec renders the InfiniBand variant.
func (s *Spec) IB() bool { return s.LinkType == LinkInfiniBand }

// pkey is the spec's PKey in 0x8005 form with the full-membership bit, ""
// when none.
func (s *Spec) pkey() string {
	k, err := inventory.ParsePKey(s.PKey)
	if s.PKey == "" || err != nil {
		return ""
	}
	return inventory.FormatPKey(k | 0x8000)
}

// ResourceFullName is prefix/name.
func (s *Spec) ResourceFullName() string { return s.ResourcePrefix + "/" + s.ResourceName }
