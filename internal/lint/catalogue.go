package lint

// Severity of a finding.
type Severity string

const (
	Error   Severity = "error"
	Warning Severity = "warning"
	Info    Severity = "info"
)

func (s Severity) rank() int {
	switch s {
	case Error:
		return 3
	case Warning:
		return 2
	case Info:
		return 1
	}
	return 0
}

// Seed documents the rules cite (in /work/shared/seeds; see docs/lint-rules.md).
const (
	seedMultus  = "Seed 1 (Multus + SR-IOV + RDMA for training clusters)"
	seedRoutes  = "Seed 2 (RDMA in containers: hostNetwork and SR-IOV)"
	seedMacvlan = "Seed 3 (macvlan shared RDMA channel)"
)

// Rule is one entry of the rule catalogue. IDs are stable: a rule is never
// renumbered; a retired rule keeps its ID reserved.
type Rule struct {
	ID       string
	Name     string
	Severity Severity // default severity; some rules lower it in named cases
	Summary  string
	Why      string // rationale with the seed section it comes from
	Fix      string // general fix; findings carry a specific one
}

// Catalogue lists every rule. docs/lint-rules.md is generated from it (see
// TestRuleCatalogueDoc).
var Catalogue = []Rule{
	// --- input validity ---
	{ID: "RDMA001", Name: "networks-annotation-malformed", Severity: Error,
		Summary: "The networks annotation cannot be parsed.",
		Why:     seedRoutes + ", 7.2: Multus (and vendor equivalents such as TKE's annotation) reads the annotation to know which networks to insert; a value it cannot parse fails the pod sandbox.",
		Fix:     "Write either a JSON list of {\"name\",\"namespace\",\"interface\"} objects or a comma-separated list of [namespace/]name[@interface]."},
	{ID: "RDMA002", Name: "nad-config-invalid", Severity: Error,
		Summary: "A NetworkAttachmentDefinition's spec.config is not a valid CNI configuration (info when it is empty and read from the node).",
		Why:     seedMultus + ", Multus与NetworkAttachmentDefinition: Multus calls the plugins in the order spec.config gives; invalid JSON or a plugin without type fails every pod that references the NAD.",
		Fix:     "Make spec.config a JSON CNI config with \"cniVersion\", \"name\" and \"type\", or a conflist with a \"plugins\" list."},
	{ID: "RDMA003", Name: "pool-config-invalid", Severity: Error,
		Summary: "A device plugin pool configuration is invalid: bad JSON, no resourceName, no selectors, or a shared pool without rdmaHcaMax.",
		Why:     seedMultus + ", 配置SR-IOV RDMA资源池, and " + seedMacvlan + ", 5.1: the pool's resourcePrefix/resourceName is the extended resource pods request; selectors decide which PF/VF or HCA backs it; rdmaHcaMax is the number of pods that may share one HCA.",
		Fix:     "Give every pool a resourceName, at least one selector (pfNames/ifNames/vendors/...) and, for a shared pool, rdmaHcaMax > 0."},

	// --- the three-place resource name ---
	{ID: "RDMA010", Name: "resource-name-mismatch", Severity: Error,
		Summary: "A pod references a NAD whose resourceName annotation differs from the RDMA resource the pod requests.",
		Why:     seedMultus + ", Multus与NetworkAttachmentDefinition: the pool, the NAD's k8s.v1.cni.cncf.io/resourceName and the pod's resource request must use the same extended resource name, otherwise the annotation cannot be tied to the allocated VF.",
		Fix:     "Request exactly the NAD's resourceName in the container's resources.limits (and requests), or point the NAD's annotation at the pool the pod requests."},
	{ID: "RDMA011", Name: "nad-resource-without-pool", Severity: Error,
		Summary: "A NAD's resourceName is not defined by any device plugin pool in the input.",
		Why:     seedMultus + ", Multus与NetworkAttachmentDefinition: resourcePrefix/resourceName of the pool must match the NAD annotation.",
		Fix:     "Fix the annotation to prefix/name of an existing pool, or add the pool."},
	{ID: "RDMA012", Name: "workload-resource-without-pool", Severity: Error,
		Summary: "A pod requests an RDMA extended resource that no device plugin pool in the input defines.",
		Why:     seedMultus + ", Multus与NetworkAttachmentDefinition and 配置SR-IOV RDMA资源池: a resource no plugin advertises never becomes allocatable, so the pod stays Pending.",
		Fix:     "Request the prefix/name of a pool that exists, or add the pool."},
	{ID: "RDMA013", Name: "resource-without-network", Severity: Error,
		Summary: "A pod requests an exclusive (VF) RDMA resource but attaches no secondary network (warning for a shared-HCA resource).",
		Why:     seedRoutes + ", 7.3: route A is two steps, the device plugin request (resources) and the CNI insertion (annotation); without the annotation the VF is allocated but never moved into the pod.",
		Fix:     "Add the networks annotation referencing the NAD whose resourceName is this resource."},
	{ID: "RDMA014", Name: "network-without-resource", Severity: Error,
		Summary: "A pod references a device-backed NAD (one with a resourceName) without requesting that resource.",
		Why:     seedRoutes + ", 7.3 and " + seedMultus + ", 让训练Pod申请高速网络: the workload must both reference the NAD and request the extended resource; without the request no VF is allocated and the sriov step has no deviceID.",
		Fix:     "Add the NAD's resourceName to resources.limits of the training container."},
	{ID: "RDMA015", Name: "extended-resource-limits", Severity: Error,
		Summary: "An extended resource (RDMA, GPU) is requested without a limit, with requests != limits, or with a fractional quantity.",
		Why:     seedRoutes + ", 7.1: device plugin resources are extended resources; Kubernetes only accepts them as whole numbers with limits set and requests equal to limits, so the pod is rejected otherwise.",
		Fix:     "Set the same whole-number quantity in limits and requests (or only in limits)."},

	{ID: "RDMA016", Name: "attachment-count-mismatch", Severity: Error,
		Summary: "The number of attachments of a device-backed network differs from the number of devices the pod requests (warning when devices are left over).",
		Why:     seedMultus + ", Multus与NetworkAttachmentDefinition: Multus hands each attachment one of the deviceIDs the device plugin allocated for the NAD's resource; more attachments than devices leaves one without a VF (CNI ADD fails), fewer leaves VFs allocated and unused.",
		Fix:     "Request as many units of the resource as the annotation has attachments of its networks."},

	// --- NAD references ---
	{ID: "RDMA020", Name: "nad-not-found", Severity: Error,
		Summary: "The networks annotation names a NAD that is not in the input (info when the input holds no network definitions at all).",
		Why:     seedMultus + ", Multus与NetworkAttachmentDefinition: Multus reads the NAD named by the annotation; a missing NAD fails the sandbox with an error that names the network only.",
		Fix:     "Create the NAD in the pod's namespace, or fix the name in the annotation."},
	{ID: "RDMA021", Name: "nad-other-namespace", Severity: Error,
		Summary: "The networks annotation names a NAD that exists only in another namespace.",
		Why:     seedMultus + ", Multus与NetworkAttachmentDefinition: an unqualified name is looked up in the pod's namespace.",
		Fix:     "Reference it as namespace/name (if Multus allows cross-namespace references) or create the NAD in the pod's namespace."},
	{ID: "RDMA022", Name: "network-annotation-on-hostnetwork", Severity: Error,
		Summary: "A hostNetwork pod carries a networks annotation, which is ignored.",
		Why:     seedRoutes + ", 八: with hostNetwork the pod shares the host netns and no CNI (Multus included) runs for it; the annotation's secondary networks never appear.",
		Fix:     "Drop either hostNetwork (route A, secondary network) or the annotation (route B, host NICs)."},

	// --- NAD plugin chain ---
	{ID: "RDMA029", Name: "cni-config-unknown-key", Severity: Warning,
		Summary: "An sriov or rdma plugin config in a NAD has a key the plugin does not read (a misspelling such as vlan_id for vlan).",
		Why:     seedMultus + ", 创建附加训练网络: the SR-IOV CNI applies vlan, spoofchk, trust and the rates from the plugin config; a misspelled key is dropped without an error (upstream and rdmanet alike), so the VF silently keeps its defaults (untagged, no rate limit) instead of what was written.",
		Fix:     "Rename the key to the one meant (the finding suggests one), or remove it; docs/cni.md lists the fields."},
	{ID: "RDMA030", Name: "static-device-id", Severity: Error,
		Summary: "A NAD writes deviceID statically into an sriov/rdma plugin.",
		Why:     seedMultus + ", 创建附加训练网络: deviceID must not be written statically; the device plugin allocates the VF and Multus injects its PCI address at runtime.",
		Fix:     "Remove deviceID from the plugin config and set the k8s.v1.cni.cncf.io/resourceName annotation instead."},
	{ID: "RDMA031", Name: "sriov-nad-without-resource-name", Severity: Error,
		Summary: "An sriov NAD has no k8s.v1.cni.cncf.io/resourceName annotation.",
		Why:     seedMultus + ", Multus与NetworkAttachmentDefinition: for device networks Multus passes the allocated deviceID to the SR-IOV and RDMA CNI only when the NAD names the resource.",
		Fix:     "Annotate the NAD with k8s.v1.cni.cncf.io/resourceName: <prefix>/<name> of the VF pool."},
	{ID: "RDMA032", Name: "rdma-without-sriov", Severity: Error,
		Summary: "The rdma plugin is chained without an sriov plugin before it.",
		Why:     seedMultus + ", RDMA CNI: the RDMA CNI runs as a chained plugin after the SR-IOV CNI and uses its result and the injected deviceID to find the VF's RDMA device.",
		Fix:     "Put {\"type\":\"sriov\",...} first and {\"type\":\"rdma\"} after it; for a shared HCA use macvlan without the rdma step."},
	{ID: "RDMA033", Name: "sriov-without-rdma", Severity: Error,
		Summary: "An sriov NAD whose pool is RDMA-capable has no rdma step (warning when the pool is unknown).",
		Why:     seedMultus + ", 创建附加训练网络 and 安装前提: with the RDMA subsystem in exclusive netns mode, the VF's RDMA device only enters the pod when the RDMA CNI moves it; without it NCCL finds no HCA and falls back to sockets.",
		Fix:     "Append {\"type\":\"rdma\"} to the plugins list after the sriov plugin."},
	{ID: "RDMA034", Name: "nad-pool-type-mismatch", Severity: Error,
		Summary: "A NAD's plugin type does not fit the pool its resourceName names (sriov over a shared-HCA pool, macvlan over a VF pool).",
		Why:     seedMultus + ", 独占VF与共享HCA方案对比: the exclusive model allocates a VF that the SR-IOV CNI moves into the pod; the shared model publishes rdmaHcaMax slots of one HCA and attaches a macvlan. Mixing them either hands sriov a deviceID that is no VF or wastes a VF under a macvlan.",
		Fix:     "Use an sriov+rdma NAD with a VF pool (exclusive) or a macvlan NAD with a shared pool (shared)."},
	{ID: "RDMA035", Name: "default-route-in-ipam", Severity: Error,
		Summary: "The training network's IPAM installs a default route (0.0.0.0/0 or ::/0).",
		Why:     seedMultus + ", IPAM and 双网络拓扑: the training net has no default route so DNS, image pulls and control traffic stay on eth0; the default route must remain on eth0.",
		Fix:     "Remove the 0.0.0.0/0 (::/0) entry from ipam.routes; add only the training subnet routes you need."},
	{ID: "RDMA036", Name: "nad-without-ipam", Severity: Error,
		Summary: "A secondary RDMA network has no IPAM, so net1 gets no address.",
		Why:     seedMultus + ", IPAM, and " + seedMacvlan + ", 三: the secondary interface still needs an address; RoCEv2 GIDs are derived from it and RDMA CM / NCCL bootstrap reach peers through it.",
		Fix:     "Add an \"ipam\" section with a cluster-wide allocator (rdmanet-ipam or whereabouts) and the training subnet."},
	{ID: "RDMA037", Name: "node-local-ipam", Severity: Warning,
		Summary: "A multi-node training network uses node-local IPAM (host-local), which hands out the same addresses on every node.",
		Why:     seedMultus + ", IPAM: when several nodes share one training subnet, use an IPAM that coordinates addresses across nodes (e.g. Whereabouts).",
		Fix:     "Use rdmanet-ipam (accepts the Whereabouts fields) or whereabouts with the training range."},
	{ID: "RDMA038", Name: "ethernet-cni-over-infiniband", Severity: Error,
		Summary: "macvlan/ipvlan (or the Ethernet sriov CNI) is placed on an InfiniBand link.",
		Why:     seedMacvlan + ", 四: macvlan multiplexes by MAC address, a pure Ethernet construct; an IPoIB interface cannot be a macvlan parent. InfiniBand uses IPoIB + pkey child interfaces (ipoib CNI) instead, and IB VFs need ib-sriov.",
		Fix:     "On InfiniBand use the ipoib CNI (shared) or ib-sriov (exclusive); keep macvlan for RoCE (link layer Ethernet)."},
	{ID: "RDMA039", Name: "macvlan-master-not-shared-pool", Severity: Warning,
		Summary: "A macvlan network's master is not an interface of the shared RDMA pool it is used with.",
		Why:     seedMacvlan + ", 三: the macvlan child must sit on the RoCE PF whose HCA the pod shares (mlx5_0 → ens6f0np0 → macvlan0); its IP is what RDMA CM and GID resolution use.",
		Fix:     "Set master to the interface in the shared pool's ifNames selector (or add that interface to the pool)."},
	{ID: "RDMA040", Name: "mtu-below-jumbo", Severity: Info,
		Summary: "A macvlan RDMA network runs below MTU 9000 (or leaves MacvlanNetwork.spec.mtu unset).",
		Why:     seedMacvlan + ", 七: MTU 9000 is key to RDMA bulk-transfer efficiency; MacvlanNetwork.spec.mtu must match the NIC and the switches.",
		Fix:     "Set mtu: 9000 when the NIC and the switch ports run jumbo frames."},

	{ID: "RDMA041", Name: "multi-rail-same-subnet", Severity: Warning,
		Summary: "A pod attaches several RDMA networks whose address ranges overlap.",
		Why:     seedMacvlan + ", 七 and 五: in multi-rail pods (net1, net2 on two RoCE NICs) interfaces in one subnet answer each other's ARP (ARP flux), so RDMA sessions bind to the wrong rail or fail to establish.",
		Fix:     "Give every rail its own subnet (one NAD/IPAM range per NIC)."},

	{ID: "RDMA042", Name: "ipam-config-invalid", Severity: Error,
		Summary: "An rdmanet-ipam/whereabouts ipam section is rejected by rdmanet-ipam (bad range, exclude or gateway outside the range, no usable address, ...).",
		Why:     seedMultus + ", IPAM: nodes sharing one training subnet need a cross-node IPAM; rdmanet-ipam accepts the Whereabouts fields, and a config it rejects fails every pod's CNI ADD on the training net.",
		Fix:     "Fix the field the message names (range as a CIDR, exclude and gateway inside the range)."},

	{ID: "RDMA043", Name: "netns-mode-conflict", Severity: Warning,
		Summary: "The input defines both an exclusive (sriov → rdma) and a shared-HCA (macvlan) RDMA network; a node serves only one of them.",
		Why:     seedMultus + ", 安装前提 (RDMA subsystem in exclusive netns mode for VFs) and " + seedMacvlan + ", 三 (rdma system set netns shared is the precondition of macvlan sharing): the RDMA netns mode is node-wide, so one node cannot serve both models.",
		Fix:     "Run the two modes on disjoint node sets (node selectors on the device plugin pools and the workloads), with the netns mode set per node set."},
	{ID: "RDMA044", Name: "ipam-unknown-key", Severity: Warning,
		Summary: "An rdmanet-ipam/whereabouts ipam section has a key neither rdmanet-ipam nor Whereabouts knows (a misspelling such as rangeStart for range_start).",
		Why:     seedMultus + ", IPAM: the cross-node IPAM reads only the fields it knows; a misspelled one is dropped without an error, so the training network silently gets the default (the whole range, no exclude, another pool) instead of what was written.",
		Fix:     "Rename the key to the field it was meant to be (the finding suggests one), or remove it."},

	// --- pools ---
	{ID: "RDMA045", Name: "overlapping-device-plugins", Severity: Error,
		Summary: "An SR-IOV pool and a shared-HCA pool select the same PF/interface (warning when they may overlap by vendor/device only).",
		Why:     seedMultus + ", 独占VF与共享HCA方案对比: unless resources are split by physical port or device set, two kinds of device plugin must not manage the same HCA/VFs, or devices are reported twice into an inconsistent resource model.",
		Fix:     "Give each pool its own PFs (pfNames for the VF pool, ifNames for the shared pool) so no interface appears in both."},
	{ID: "RDMA046", Name: "sriov-pool-without-isrdma", Severity: Warning,
		Summary: "A VF pool used by an rdma-chained NAD does not select isRdma: true.",
		Why:     seedMultus + ", 配置SR-IOV RDMA资源池: the pool registers VFs with RDMA capability (isRdma: true); without it VFs lacking an RDMA device can be allocated and the rdma step fails.",
		Fix:     "Add \"isRdma\": true to the pool's selectors."},

	// --- route B: hostNetwork ---
	{ID: "RDMA050", Name: "hostnetwork-dnspolicy", Severity: Error,
		Summary: "hostNetwork: true without dnsPolicy: ClusterFirstWithHostNet.",
		Why:     seedRoutes + ", 8.1: for hostNetwork pods ClusterFirst behaves like Default (the node's resolv.conf), so Service names such as MASTER_ADDR do not resolve and rendezvous hangs until timeout; treat hostNetwork and ClusterFirstWithHostNet as one unit.",
		Fix:     "Set spec.dnsPolicy: ClusterFirstWithHostNet."},
	{ID: "RDMA051", Name: "hostnetwork-fixed-port", Severity: Warning,
		Summary: "A hostNetwork pod uses a fixed MASTER_PORT (info when the workload declares whole-node placement).",
		Why:     seedRoutes + ", 十三.1: with hostNetwork every port is a node port; a hard-coded port means one job per node, a second job on the same node collides. Fine for whole-node allocation, a hazard in mixed clusters.",
		Fix:     "Allocate whole nodes to the job (and annotate the template rdmanet.io/node-exclusive: \"true\"), or give each job its own port."},
	{ID: "RDMA052", Name: "host-mode-no-rdma-device", Severity: Warning,
		Summary: "A hostNetwork RDMA pod gets no /dev/infiniband devices: no RDMA resource, not privileged, no hostPath.",
		Why:     seedRoutes + ", 7.1: the device plugin is what mounts the character devices (/dev/infiniband/uverbs*) verbs needs; hostNetwork makes the netdevs visible, not the device nodes (rdmanet's host mode uses a shared pool for them).",
		Fix:     "Request a shared RDMA pool resource (e.g. rdma/<pool>: 1) in the container's limits."},
	{ID: "RDMA053", Name: "hostnetwork-vf-resource", Severity: Warning,
		Summary: "A hostNetwork pod requests an exclusive VF resource.",
		Why:     seedRoutes + ", 八: with hostNetwork no CNI runs, so the allocated VF is never configured or moved; the device plugin and CNI steps are not needed at all.",
		Fix:     "Request a shared pool resource for the device nodes, or drop hostNetwork and attach the VF network."},

	// --- what every RDMA pod needs ---
	{ID: "RDMA060", Name: "missing-ipc-lock", Severity: Error,
		Summary: "An RDMA container lacks the IPC_LOCK capability.",
		Why:     seedRoutes + ", 9.1 and 2.4: memory registration pins pages (mlock); beyond RLIMIT_MEMLOCK that needs CAP_IPC_LOCK, otherwise ibv_reg_mr fails.",
		Fix:     "Add securityContext.capabilities.add: [\"IPC_LOCK\"] to the container."},
	{ID: "RDMA061", Name: "privileged-instead-of-capability", Severity: Warning,
		Summary: "An RDMA container runs privileged.",
		Why:     seedRoutes + ", 9.1 and 十三.2: privileged is usually added for device or network access, not for RDMA; grant IPC_LOCK precisely. With hostNetwork, privileged leaves essentially no security boundary.",
		Fix:     "Drop privileged: true and add capabilities.add: [\"IPC_LOCK\"] (plus an RDMA device resource)."},
	{ID: "RDMA062", Name: "non-root-memlock", Severity: Warning,
		Summary: "An RDMA container runs as a non-root user; the memlock limit, not the capability, will bound pinned memory.",
		Why:     seedMacvlan + ", 六: the container runtime's memlock limit has to be raised (default_ulimits memlock=-1), otherwise non-root users cannot pin enough memory; added capabilities do not reach a non-root process's effective set.",
		Fix:     "Raise the runtime's memlock ulimit (e.g. CRI-O default_ulimits = [\"memlock=-1:-1\"]) on the RDMA nodes, or run the training process as root."},

	// --- NCCL environment ---
	{ID: "RDMA070", Name: "gid-index-hardcoded", Severity: Warning,
		Summary: "NCCL_IB_GID_INDEX is hard-coded (info on InfiniBand, where it is not needed).",
		Why:     seedRoutes + ", 9.2 and " + seedMultus + ", 让训练Pod申请高速网络: the GID index is never universal; it depends on driver, OFED and port configuration and changes between machines. A wrong index lets NCCL initialise and then time out or crawl. Pure InfiniBand does not need it.",
		Fix:     "Leave it unset or derive it per node from show_gids (VER v2 with an IPv4 address; kubectl rdma doctor reports it)."},
	{ID: "RDMA071", Name: "ib-disabled-with-rdma", Severity: Warning,
		Summary: "NCCL_IB_DISABLE=1 (or NCCL_NET=Socket) in a pod that holds RDMA resources or an RDMA network.",
		Why:     seedRoutes + ", 10.3 (eth0 + NCCL_IB_DISABLE=1 is plain TCP) and " + seedMultus + ", 验证通信路径: NCCL_IB_DISABLE=1 is for a socket baseline; otherwise the pod holds a VF/HCA slot and trains over TCP.",
		Fix:     "Remove NCCL_IB_DISABLE (or set 0) unless this is a deliberate socket baseline run."},
	{ID: "RDMA072", Name: "socket-ifname-eth0-with-secondary", Severity: Warning,
		Summary: "NCCL_SOCKET_IFNAME selects eth0 in a pod that has a secondary training interface.",
		Why:     seedRoutes + ", 10.3 and " + seedMacvlan + ", 八: NCCL_SOCKET_IFNAME is the fingerprint of the route; with a secondary net it must name that interface (net1), not eth0, or bootstrap runs on the pod network.",
		Fix:     "Set NCCL_SOCKET_IFNAME to the secondary interface, e.g. \"=net1\"."},
	{ID: "RDMA073", Name: "socket-ifname-unknown-interface", Severity: Error,
		Summary: "NCCL_SOCKET_IFNAME selects no interface the pod will have (warning for a Multus name such as net1 in a hostNetwork pod).",
		Why:     seedRoutes + ", 10.3: eth1 (or net1) does not appear from nowhere; it is the interface the annotation's @eth1 inserts. A name matching none of the pod's interfaces makes NCCL bootstrap fail.",
		Fix:     "Make NCCL_SOCKET_IFNAME and the annotation's @ifname (or the \"interface\" field) the same name."},
	{ID: "RDMA074", Name: "socket-ifname-unset-with-secondary", Severity: Warning,
		Summary: "A pod with a secondary training interface leaves NCCL_SOCKET_IFNAME unset.",
		Why:     seedMultus + ", 双网络拓扑 and " + seedMacvlan + ", 八: NCCL_SOCKET_IFNAME restricts NCCL to the training interface; without it NCCL picks an interface by its own order, often eth0.",
		Fix:     "Set NCCL_SOCKET_IFNAME to \"=<interface>\" of the secondary network."},
	{ID: "RDMA075", Name: "ifname-hca-confusion", Severity: Error,
		Summary: "NCCL_SOCKET_IFNAME names an RDMA device or NCCL_IB_HCA names a network interface.",
		Why:     seedMultus + ", NCCL与GPUDirect RDMA: NCCL_SOCKET_IFNAME filters IP interfaces, NCCL_IB_HCA filters verbs devices; they are not the same object.",
		Fix:     "Put netdev names (net1, eth0) in NCCL_SOCKET_IFNAME and verbs device names (mlx5_0, from ibdev2netdev) in NCCL_IB_HCA."},
	{ID: "RDMA076", Name: "ib-hca-hardcoded-exclusive", Severity: Warning,
		Summary: "An exclusive-VF pod hard-codes a specific NCCL_IB_HCA device.",
		Why:     seedMultus + ", 双网络拓扑 and 让训练Pod申请高速网络: when the container sees only its one VF HCA, NCCL_IB_HCA is usually unnecessary; do not copy another node's device names — the VF's RDMA device name differs per node and per allocation.",
		Fix:     "Remove NCCL_IB_HCA, or use a prefix such as \"mlx5\" rather than one device."},
	{ID: "RDMA077", Name: "default-route-annotation", Severity: Error,
		Summary: "The networks annotation asks for the default route on the training network.",
		Why:     seedMultus + ", IPAM and 验证通信路径: the default route stays on eth0; a default route on net1 sends DNS, image and control traffic into the training fabric.",
		Fix:     "Remove \"default-route\" from the network selection."},
	{ID: "RDMA078", Name: "gpu-workload-on-tcp", Severity: Info,
		Summary: "A GPU workload has no RDMA path, so collective traffic runs over TCP sockets.",
		Why:     seedRoutes + ", 1.1: for multi-node training RDMA is the entry ticket, not an optimisation; the TCP path costs copies, protocol CPU and interrupts.",
		Fix:     "If this job spans nodes, give it an RDMA path (kubectl rdma render --mode exclusive|shared|host)."},
	{ID: "RDMA079", Name: "mixed-rdma-modes", Severity: Warning,
		Summary: "A pod mixes exclusive (VF) and shared-HCA RDMA resources or networks.",
		Why:     seedMultus + ", 独占VF与共享HCA方案对比: the two are different resource models; one pod should take one of them.",
		Fix:     "Pick one mode for the pod: an sriov+rdma network with a VF pool, or a macvlan network with a shared pool."},

	{ID: "RDMA085", Name: "no-gang-scheduling", Severity: Info,
		Summary: "A multi-pod RDMA training workload is not gang-scheduled.",
		Why:     seedRoutes + ", 十一 and " + seedMultus + ", 让训练Pod申请高速网络: training is all-or-nothing; 7 of 8 pods started hold their GPUs and VFs while waiting forever, and several such jobs deadlock. A training operator or a gang scheduler (Volcano PodGroup minMember, Kueue, coscheduling) admits all members together.",
		Fix:     "Run it through a gang scheduler (schedulerName: volcano with a PodGroup, a Kueue queue-name label, or a coscheduling pod-group label)."},
	{ID: "RDMA086", Name: "replicas-may-share-node", Severity: Info,
		Summary: "Nothing keeps the replicas of a multi-node RDMA job on different nodes.",
		Why:     seedMultus + ", 让训练Pod申请高速网络: the training replicas should be scheduled onto different nodes; two members on one node share its NIC (and, with hostNetwork, its ports).",
		Fix:     "Add a required podAntiAffinity on the job's own label with topologyKey kubernetes.io/hostname (or a DoNotSchedule topologySpreadConstraint)."},
	{ID: "RDMA087", Name: "networkpolicy-on-hostnetwork", Severity: Warning,
		Summary: "A NetworkPolicy selects hostNetwork training pods, on which it has no effect.",
		Why:     seedRoutes + ", 十三.3: network policies match by pod IP; a hostNetwork pod's IP is the node's, so the policy's semantics break down.",
		Fix:     "Do not rely on NetworkPolicy for hostNetwork pods; isolate such jobs on dedicated nodes or use the exclusive/shared modes."},
	{ID: "RDMA088", Name: "gpu-operator-gdr-disabled", Severity: Info,
		Summary: "The GPU Operator ClusterPolicy in the input does not enable GPUDirect RDMA while RDMA GPU workloads are present.",
		Why:     seedMacvlan + ", 六 and " + seedMultus + ", GPUDirect RDMA: GPUDirect RDMA is not switched on by installing a CNI; with the GPU Operator it needs spec.driver.rdma.enabled: true (nvidia-peermem).",
		Fix:     "Set spec.driver.rdma.enabled: true in the ClusterPolicy, then confirm /GDRDMA in the NCCL log (kubectl rdma nccl)."},

	// --- DRA (resource.k8s.io/v1 claims; docs/dra.md) ---
	{ID: "RDMA090", Name: "dra-gpu-nic-unaligned", Severity: Warning,
		Summary: "A ResourceClaim(Template) requests GPUs and RDMA NICs without a matchAttribute resource.kubernetes.io/pcieRoot constraint pairing each GPU with a NIC, or with one constraint over count-N requests that forces all devices under one root.",
		Why:     seedMultus + ", NCCL与GPUDirect RDMA: GPUDirect RDMA wants each GPU next to its NIC under the same PCIe root; with DRA that is a matchAttribute constraint on resource.kubernetes.io/pcieRoot (docs/dra.md, Alignment). Without it the scheduler hands out any GPU with any NIC. A matchAttribute makes all devices of the requests it names share one value, so one constraint over \"gpus: count 8\" and \"nics: count 8\" demands 16 devices under one root, which no server has: the claim is never allocated.",
		Fix:     "Write one request pair per GPU/NIC pair (gpu-0 + nic-0, … count 1 each) and one constraint {requests: [gpu-i, nic-i], matchAttribute: resource.kubernetes.io/pcieRoot} per pair, as examples/dra/gpu-nic-aligned-x8.yaml does (kubectl rdma render --dra writes it)."},
	{ID: "RDMA091", Name: "dra-nad-without-resource-name", Severity: Error,
		Summary: "A pod that takes its RDMA NIC from a DRA claim attaches a network whose NAD has no k8s.v1.cni.cncf.io/resourceName (warning for a macvlan/ipvlan network, which needs no device).",
		Why:     seedMultus + ", Multus与NetworkAttachmentDefinition: the NAD's resourceName is what ties an attachment to the pod's device. With DRA the meta CNI (and Multus' DRA support) picks the claim device whose k8s.cni.cncf.io/resourceName attribute equals the NAD's resourceName; without the annotation no device is found, the sriov step gets no deviceID and CNI ADD fails.",
		Fix:     "Annotate the NAD with k8s.v1.cni.cncf.io/resourceName: <prefix>/<name> of the pool the claim's DeviceClass selects (the device's k8s.cni.cncf.io/resourceName)."},
	{ID: "RDMA092", Name: "dra-nic-class-not-pool-pinned", Severity: Warning,
		Summary: "A pod's network needs a device of the NAD's pool, but its claim's NIC request uses a DeviceClass (and selectors) that do not pin that pool (error when they pin only other pools).",
		Why:     seedMultus + ", Multus与NetworkAttachmentDefinition (the three-place resource name): with DRA the third place is the claim's DeviceClass. A class such as rdma-exclusive.rdmanet.io selects every exclusive device of the driver, in any pool; the scheduler may allocate a VF of another pool, whose k8s.cni.cncf.io/resourceName does not match the NAD, and the attachment fails at CNI ADD.",
		Fix:     "Use a DeviceClass whose selector adds device.attributes[\"k8s.cni.cncf.io\"].resourceName == \"<the NAD's resourceName>\" (like deploy/dra's sriov-rdma.example.com; kubectl rdma render --dra writes one per pool), or add that selector to the request."},
	{ID: "RDMA093", Name: "dra-claim-not-found", Severity: Error,
		Summary: "A pod's spec.resourceClaims names a ResourceClaim or ResourceClaimTemplate that is not in the input (info when the input holds no claims at all).",
		Why:     seedRoutes + ", 7.3 (the device request is half of the route): with DRA the request is the claim; a pod whose claim or template does not exist is never scheduled, and lint cannot tell its devices, alignment or pool.",
		Fix:     "Create the claim or template in the pod's namespace, or fix the name; lint it together with the workload and its DeviceClasses."},

	// --- rendezvous ---
	{ID: "RDMA080", Name: "rendezvous-service-not-headless", Severity: Warning,
		Summary: "MASTER_ADDR resolves through a Service that is not headless.",
		Why:     seedRoutes + ", 十一: clusterIP: None makes DNS return the pod's own IP; rank 0 must be a fixed, directly reachable address, never load-balanced to another replica.",
		Fix:     "Set spec.clusterIP: None on the rendezvous Service."},
	{ID: "RDMA081", Name: "rendezvous-service-selector-mismatch", Severity: Error,
		Summary: "The rendezvous Service's selector does not match the workload's pod labels.",
		Why:     seedRoutes + ", 十一 and " + seedMultus + ", 让训练Pod申请高速网络: the headless Service resolves to the pods its selector matches; a selector that matches nothing leaves MASTER_ADDR without an address.",
		Fix:     "Make the Service selector a subset of the pod template's labels."},
	{ID: "RDMA082", Name: "rendezvous-subdomain-mismatch", Severity: Error,
		Summary: "MASTER_ADDR is a pod hostname under a Service, but the pods do not carry that subdomain or hostname.",
		Why:     seedMultus + ", 让训练Pod申请高速网络: the headless Service together with spec.subdomain gives members their rendezvous names (face-trainer-0.face-rdzv...).",
		Fix:     "Set spec.subdomain to the Service name (StatefulSet: spec.serviceName) and use <job>-<index> as the host part."},
	{ID: "RDMA083", Name: "rendezvous-service-not-found", Severity: Info,
		Summary: "MASTER_ADDR names a Service that is not in the input.",
		Why:     seedRoutes + ", 十一: MASTER_ADDR is normally the name of a headless Service; lint can only check it when the Service is linted together with the workload.",
		Fix:     "Lint the Service together with the workload (or create it)."},
	{ID: "RDMA084", Name: "headless-publish-not-ready", Severity: Info,
		Summary: "A headless rendezvous Service used for pod hostnames does not set publishNotReadyAddresses: true.",
		Why:     seedMultus + ", 让训练Pod申请高速网络: the seed's rendezvous Service publishes not-ready addresses so members resolve each other while they start.",
		Fix:     "Set spec.publishNotReadyAddresses: true."},
	{ID: "RDMA100", Name: "ipoib-over-ethernet", Severity: Error,
		Summary: "An ipoib network's master (or its resource's pool) is an Ethernet/RoCE interface.",
		Why:     seedMacvlan + ": on InfiniBand the shared mode is an IPoIB child (PKey) of the IB port's netdev; an Ethernet netdev cannot be an IPoIB parent, so the plugin refuses every ADD.",
		Fix:     "Point master (or the resourceName's shared pool) at the IB port's IPoIB netdev; on RoCE use macvlan for shared mode."},
	{ID: "RDMA101", Name: "ipoib-without-master", Severity: Error,
		Summary: "An ipoib network names no master and no resourceName, so nothing tells the plugin which IB port to make the child of.",
		Why:     seedMacvlan + ": the IPoIB child is made of one IB port's netdev; ipoib-cni requires master, and rdmanet's ipoib otherwise takes the port from the deviceID its meta plugin injects, which needs the NAD's k8s.v1.cni.cncf.io/resourceName of a shared IB pool.",
		Fix:     "Set \"master\" to the IB port's IPoIB netdev (ibdev2netdev), or annotate the NAD with the shared IB pool's resourceName."},
}

// ruleByID indexes the catalogue.
var ruleByID = func() map[string]*Rule {
	m := make(map[string]*Rule, len(Catalogue))
	for i := range Catalogue {
		m[Catalogue[i].ID] = &Catalogue[i]
	}
	return m
}()

// LookupRule returns the catalogue entry for an ID.
func LookupRule(id string) (Rule, bool) {
	r, ok := ruleByID[id]
	if !ok {
		return Rule{}, false
	}
	return *r, true
}
