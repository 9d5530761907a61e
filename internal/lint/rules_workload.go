package lint

import (
	"cmp"
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/rdmanet/rdmanet/internal/manifest"
)

func (c *checker) checkWorkload(w *workload) {
	c.cur = len(c.res.Workloads)
	c.res.Workloads = append(c.res.Workloads, Workload{Kind: w.obj.Kind, Namespace: w.ns, Name: w.obj.Name, Mode: w.mode, Evidence: append([]string{}, w.evidence...), source: w.obj.Source.String()})
	defer func() { c.cur = -1 }()

	c.checkAnnotation(w)
	c.checkResources(w)
	c.checkNetworkRefs(w)
	c.checkDRA(w)
	c.checkHostNetwork(w)
	c.checkRDMANeeds(w)
	c.checkNCCL(w)
	c.checkRendezvous(w)
	c.checkScheduling(w)
}

func (w *workload) isRDMA() bool {
	return w.mode == ModeExclusive || w.mode == ModeShared || w.mode == ModeHost
}

// RDMA001, RDMA077
func (c *checker) checkAnnotation(w *workload) {
	if w.netsErr != nil {
		c.add("RDMA001", w.obj, w.netField, fmt.Sprintf("%s %s: %v", w.netsKey, quoteVal(w.t.Meta.Annotations[w.netsKey]), w.netsErr), "")
	}
	for _, n := range w.nets {
		if len(n.sel.DefaultRoute) > 0 {
			c.add("RDMA077", w.obj, n.field, fmt.Sprintf("network %q requests \"default-route\": %v; the default route would move from eth0 to %s, the training net", n.sel.Name, n.sel.DefaultRoute, ifaceOrUnknown(n.sel.Interface)), fmt.Sprintf("remove \"default-route\" from the %q selection", n.sel.Name))
		}
	}
}

// RDMA012, RDMA015
func (c *checker) checkResources(w *workload) {
	all := append(append([]corev1.Container{}, w.t.Spec.InitContainers...), w.t.Spec.Containers...)
	for i := range all {
		ct := &all[i]
		base := w.t.Field(fmt.Sprintf("spec.containers[%s]", ct.Name))
		if i < len(w.t.Spec.InitContainers) {
			base = w.t.Field(fmt.Sprintf("spec.initContainers[%s]", ct.Name))
		}
		names := map[string]bool{}
		for n := range ct.Resources.Limits {
			names[string(n)] = true
		}
		for n := range ct.Resources.Requests {
			names[string(n)] = true
		}
		for _, n := range sortedStrings(names) {
			if !isExtendedResource(n) {
				continue
			}
			lim, hasLim := ct.Resources.Limits[corev1.ResourceName(n)]
			req, hasReq := ct.Resources.Requests[corev1.ResourceName(n)]
			switch {
			case !hasLim:
				c.add("RDMA015", w.obj, base+".resources.requests["+n+"]", fmt.Sprintf("container %q requests extended resource %s: %s without a limit; extended resources cannot be overcommitted and the API server rejects the pod", ct.Name, n, req.String()), fmt.Sprintf("set resources.limits[%s]: %q (requests may be dropped)", n, req.String()))
			case hasReq && req.Cmp(lim) != 0:
				c.add("RDMA015", w.obj, base+".resources.requests["+n+"]", fmt.Sprintf("container %q: %s requests %s but limits %s; for extended resources requests must equal limits", ct.Name, n, req.String(), lim.String()), fmt.Sprintf("set both to %q", lim.String()))
			case lim.MilliValue()%1000 != 0:
				c.add("RDMA015", w.obj, base+".resources.limits["+n+"]", fmt.Sprintf("container %q: %s is %s; device plugin resources are whole devices", ct.Name, n, lim.String()), "use a whole number")
			}
		}
	}
	if len(w.in.pools) == 0 {
		return
	}
	for _, r := range w.rdmaResources() {
		if r.pool != nil {
			continue
		}
		var have []string
		for _, p := range w.in.pools {
			have = append(have, p.FullName())
		}
		c.add("RDMA012", w.obj, r.field, fmt.Sprintf("container %q requests %s, but no device plugin pool in the input defines it (pools: %s); the resource never becomes allocatable and the pod stays Pending", r.ctr.c.Name, r.name, strings.Join(have, ", ")), fmt.Sprintf("request one of %s, or add a pool with resourcePrefix/resourceName %s", strings.Join(have, ", "), r.name))
	}
}

// RDMA010, RDMA013, RDMA014, RDMA020, RDMA021, RDMA079
func (c *checker) checkNetworkRefs(w *workload) {
	haveNADs := len(w.in.nads) > 0
	rdmaRes := w.rdmaResources()
	reqNames := map[string]bool{}
	for _, r := range rdmaRes {
		reqNames[r.name] = true
	}
	if !w.hostNetwork() {
		for _, n := range w.nets {
			if w.netsKey != manifest.NetworksAnnotation {
				continue // vendor annotations name vendor network objects
			}
			if n.nad == nil {
				qualified := n.sel.Name
				if n.sel.Namespace != "" {
					qualified = n.sel.Namespace + "/" + n.sel.Name
				}
				switch {
				case len(n.other) > 0:
					var where []string
					for _, o := range n.other {
						where = append(where, o.Ref())
					}
					fix := fmt.Sprintf("reference it as %s/%s, or create the NAD in namespace %q", n.other[0].Namespace, n.sel.Name, orDefault(w.ns))
					if g := n.other[0]; g.Generated && g.Obj.Kind != "SpiderMultusConfig" {
						fix = fmt.Sprintf("set spec.networkNamespace: %s on %s (it generates the NAD), or reference it as %s/%s", orDefault(w.ns), g.Obj.Ref(), g.Namespace, n.sel.Name)
					}
					c.add("RDMA021", w.obj, n.field, fmt.Sprintf("network %q is looked up in namespace %q, but the NAD exists only as %s", qualified, orDefault(w.ns), strings.Join(where, ", ")), fix)
				case haveNADs:
					c.add("RDMA020", w.obj, n.field, fmt.Sprintf("network %q references NetworkAttachmentDefinition %s, which is not in the input; Multus fails the pod sandbox", qualified, manifest.Ref("NetworkAttachmentDefinition", cmp.Or(n.sel.Namespace, w.ns), n.sel.Name)), "create the NAD or fix the name in the annotation")
				default:
					c.addSev("RDMA020", Info, w.obj, n.field, fmt.Sprintf("network %q: its NetworkAttachmentDefinition is not in the input, so the NAD, resource name and interface chain cannot be checked", qualified), "lint the NAD and the device plugin config together with the workload")
				}
				continue
			}
			rn := n.nad.ResourceName
			if rn == "" {
				continue
			}
			if reqNames[rn] {
				continue
			}
			if w.draCovers(rn) {
				continue // the NIC comes from a DRA claim: RDMA092/RDMA093 check it
			}
			if len(rdmaRes) == 0 {
				fix := fmt.Sprintf("add %s: \"1\" to resources.limits of the training container (unless the network-resources-injector webhook adds it at admission)", rn)
				if len(w.claims) > 0 {
					fix = fmt.Sprintf("add a NIC request of a DeviceClass that selects pool %s (driver %s) to the pod's claim, or %s: \"1\" to resources.limits of the training container", rn, DRADriver, rn)
				}
				c.add("RDMA014", w.obj, n.field, fmt.Sprintf("network %q (%s) is backed by resource %s, but no container requests it%s; no device is allocated and the CNI has no deviceID", n.sel.Name, n.nad.Ref(), rn, map[bool]string{true: " and the pod's DRA claims have no RDMA NIC request", false: ""}[len(w.claims) > 0]), fix)
			} else {
				var got []string
				for _, r := range rdmaRes {
					got = append(got, r.name)
				}
				c.add("RDMA010", w.obj, rdmaRes[0].field, fmt.Sprintf("network %q (%s) is tied to resource %s (annotation %s), but the pod requests %s; the three names (pool, NAD annotation, pod request) must be the same", n.sel.Name, n.nad.Ref(), rn, manifest.ResourceNameAnnotation, strings.Join(got, ", ")), fmt.Sprintf("request %s instead of %s, or change the NAD's resourceName annotation", rn, strings.Join(got, ", ")))
			}
		}
		// RDMA016: attachments per resource vs devices requested.
		attach := map[string][]string{}
		for _, n := range w.nets {
			if n.nad != nil && n.nad.ResourceName != "" {
				attach[n.nad.ResourceName] = append(attach[n.nad.ResourceName], n.sel.Name+"@"+n.sel.Interface)
			}
		}
		for _, rn := range slices.Sorted(maps.Keys(attach)) {
			var have int64
			var field string
			for _, r := range rdmaRes {
				if r.name == rn {
					have += r.limit
					field = r.field
				}
			}
			if n, f := w.draPinned(rn); n > 0 {
				have += n
				field = cmp.Or(field, f)
			}
			if have == 0 {
				continue // RDMA014/RDMA010 report it
			}
			want := int64(len(attach[rn]))
			switch {
			case want > have && !reqNames[rn]:
				c.add("RDMA016", w.obj, field, fmt.Sprintf("%d attachments (%s) need a device of %s each, but the pod's DRA claims pin %d device(s) of that pool; the attachment without a device fails CNI ADD", want, strings.Join(attach[rn], ", "), rn, have), fmt.Sprintf("give the claim %d NIC request(s) of the pool's DeviceClass (one per attachment)", want))
			case want > have:
				c.add("RDMA016", w.obj, field, fmt.Sprintf("%d attachments (%s) need a device of %s each, but the pod requests %d; the attachment without a device fails CNI ADD", want, strings.Join(attach[rn], ", "), rn, have), fmt.Sprintf("request %s: %q", rn, fmt.Sprint(want)))
			case want < have && nadKindForResource(w, rn) == resExclusive && !reqNames[rn]:
				c.addSev("RDMA016", Warning, w.obj, field, fmt.Sprintf("the pod's DRA claims pin %d devices of %s but the pod attaches only %d (%s); the other VFs are allocated and never used", have, rn, want, strings.Join(attach[rn], ", ")), fmt.Sprintf("give the claim %d NIC request(s) of that pool, or attach the network once per VF", want))
			case want < have && nadKindForResource(w, rn) == resExclusive:
				c.addSev("RDMA016", Warning, w.obj, field, fmt.Sprintf("the pod requests %d devices of %s but attaches only %d (%s); the other VFs are allocated and never used", have, rn, want, strings.Join(attach[rn], ", ")), fmt.Sprintf("request %s: %q, or attach the network once per VF", rn, fmt.Sprint(want)))
			}
		}
		if len(w.nets) == 0 && w.netsErr == nil {
			for _, r := range rdmaRes {
				switch r.kind {
				case resExclusive:
					c.add("RDMA013", w.obj, r.field, fmt.Sprintf("container %q requests VF resource %s: %d but the pod has no networks annotation; the VF is allocated and never moved into the pod", r.ctr.c.Name, r.name, r.limit), fmt.Sprintf("add %s: '[{\"name\": \"<nad>\", \"interface\": \"net1\"}]' naming the NAD whose resourceName is %s", manifest.NetworksAnnotation, r.name))
				case resShared:
					if !poolIsIB(r.pool) {
						c.addSev("RDMA013", Warning, w.obj, r.field, fmt.Sprintf("container %q requests shared HCA resource %s but the pod has no secondary network; it gets /dev/infiniband but no interface on the RoCE NIC, so no RoCE GID carries its IP", r.ctr.c.Name, r.name), "attach the macvlan network on the HCA's interface (networks annotation)")
					}
				}
			}
			for _, u := range w.draNICs() {
				switch u.req.kind {
				case resExclusive:
					c.add("RDMA013", w.obj, u.pc.field, fmt.Sprintf("%s gives the pod an exclusive VF but the pod has no networks annotation; the claim brings the VF's device nodes, its netdev is never moved into the pod", u), fmt.Sprintf("add %s: '[{\"name\": \"<nad>\", \"interface\": \"net1\"}]' naming the NAD whose resourceName is the pool of the VF%s", manifest.NetworksAnnotation, poolHint([]nicUse{u})))
				case resShared:
					c.addSev("RDMA013", Warning, w.obj, u.pc.field, fmt.Sprintf("%s gives the pod a shared HCA but the pod has no secondary network; it gets /dev/infiniband but no interface on the RoCE NIC, so no RoCE GID carries its IP", u), "attach the macvlan network on the HCA's interface (networks annotation)")
				}
			}
		}
	}
	// RDMA079: both models in one pod.
	var excl, shar []string
	for _, r := range rdmaRes {
		switch r.kind {
		case resExclusive:
			excl = append(excl, r.name)
		case resShared:
			shar = append(shar, r.name)
		}
	}
	for _, n := range w.nets {
		switch nadKind(n.nad) {
		case resExclusive:
			excl = append(excl, n.nad.Ref())
		case resShared:
			shar = append(shar, n.nad.Ref())
		}
	}
	if len(excl) > 0 && len(shar) > 0 {
		c.add("RDMA079", w.obj, w.t.Field("spec"), fmt.Sprintf("the pod mixes exclusive VF (%s) and shared-HCA (%s) resources/networks", strings.Join(excl, ", "), strings.Join(shar, ", ")), "")
	}
}

// RDMA022, RDMA050, RDMA051, RDMA052, RDMA053
func (c *checker) checkHostNetwork(w *workload) {
	if !w.hostNetwork() {
		return
	}
	if w.netsKey != "" {
		c.add("RDMA022", w.obj, w.netField, fmt.Sprintf("hostNetwork pod carries %s; no CNI runs for hostNetwork pods, the secondary networks never appear", w.netsKey), "")
	}
	dp := w.t.Spec.DNSPolicy
	switch dp {
	case "", corev1.DNSClusterFirst:
		shown := string(dp)
		if shown == "" {
			shown = "unset (ClusterFirst)"
		}
		c.add("RDMA050", w.obj, w.t.Field("spec.dnsPolicy"), fmt.Sprintf("hostNetwork: true with dnsPolicy %s: it behaves like Default, cluster Service names (MASTER_ADDR) do not resolve and rendezvous hangs", shown), "set spec.dnsPolicy: ClusterFirstWithHostNet")
	case corev1.DNSDefault:
		if e, ok := w.env("MASTER_ADDR"); ok && net.ParseIP(e.value) == nil && e.value != "" {
			c.add("RDMA050", w.obj, w.t.Field("spec.dnsPolicy"), fmt.Sprintf("hostNetwork: true with dnsPolicy Default uses the node's resolver, but MASTER_ADDR=%q is a name", e.value), "set spec.dnsPolicy: ClusterFirstWithHostNet")
		}
	}
	if e, ok := w.env("MASTER_PORT"); ok && strings.TrimSpace(e.value) != "" && (w.isRDMA() || w.mode == ModeTCP || w.gpus() > 0) {
		if isTrue(w.t.Meta.Annotations[NodeExclusiveAnnotation]) || isTrue(w.obj.Annotations[NodeExclusiveAnnotation]) {
			c.addSev("RDMA051", Info, w.obj, e.field, fmt.Sprintf("hostNetwork pod binds MASTER_PORT=%s on the node; fine because the workload declares whole-node placement (%s)", e.value, NodeExclusiveAnnotation), "keep the whole-node placement true (one job per node)")
		} else {
			c.add("RDMA051", w.obj, e.field, fmt.Sprintf("hostNetwork pod binds MASTER_PORT=%s on the node itself; a second job on the same node collides on that port", e.value), fmt.Sprintf("allocate whole nodes and annotate the pod template %s: \"true\", or give every job its own port", NodeExclusiveAnnotation))
		}
	}
	if w.mode != ModeHost {
		return
	}
	res := w.rdmaResources()
	if len(res) == 0 && !w.privileged() && !w.hasDevInfiniband() {
		c.add("RDMA052", w.obj, w.t.Field("spec.containers"), "hostNetwork RDMA pod requests no RDMA device resource and is not privileged: it sees the host's RDMA netdevs but gets no /dev/infiniband/uverbs* device nodes, so verbs finds no device", "request a shared RDMA pool resource (e.g. rdma/<pool>: 1) in the training container's limits")
	}
	for _, r := range res {
		if r.kind == resExclusive {
			c.add("RDMA053", w.obj, r.field, fmt.Sprintf("hostNetwork pod requests VF resource %s; no CNI runs for it, so the VF is allocated but never configured", r.name), "request a shared pool resource instead, or drop hostNetwork and attach the VF network")
		}
	}
}

// RDMA060, RDMA061, RDMA062
func (c *checker) checkRDMANeeds(w *workload) {
	if !w.isRDMA() {
		return
	}
	for _, ct := range w.rdmaContainers() {
		capField := ct.field + ".securityContext.capabilities.add"
		switch {
		case ct.privileged:
			c.add("RDMA061", w.obj, ct.field+".securityContext.privileged", fmt.Sprintf("container %q runs privileged; RDMA needs only IPC_LOCK (and its device resource)%s", ct.c.Name, map[bool]string{true: "; with hostNetwork this leaves essentially no isolation", false: ""}[w.hostNetwork()]), "replace privileged: true with capabilities.add: [\"IPC_LOCK\"]")
		case !ct.ipcLock && !ct.capAll:
			c.add("RDMA060", w.obj, capField, fmt.Sprintf("container %q (mode %s) has no IPC_LOCK capability; RDMA memory registration pins pages beyond RLIMIT_MEMLOCK and ibv_reg_mr fails", ct.c.Name, w.mode), "add securityContext.capabilities.add: [\"IPC_LOCK\"]")
		}
		if ct.nonRoot {
			c.add("RDMA062", w.obj, ct.field+".securityContext", fmt.Sprintf("container %q runs as a non-root user; IPC_LOCK does not reach its effective capabilities, so the runtime's memlock limit bounds the memory NCCL can register", ct.c.Name), "")
		}
	}
}

// exactHCA matches one specific verbs device (mlx5_3, rocep65s0f0, ibp65s0).
var multusName = regexp.MustCompile(`^net\d+$`)

var exactHCA = regexp.MustCompile(`(_\d+|^roce\w+|^ibp\w+)$`)

// RDMA070-076, RDMA078
func (c *checker) checkNCCL(w *workload) {
	for _, ct := range w.ctrs {
		if e, ok := ct.env["NCCL_SOCKET_IFNAME"]; ok && e.literal {
			for _, it := range parseFilter(e.value).items {
				if hcaNameRE.MatchString(it) {
					c.add("RDMA075", w.obj, e.field, fmt.Sprintf("NCCL_SOCKET_IFNAME=%q names %q, a verbs (RDMA) device; NCCL_SOCKET_IFNAME filters IP interfaces", e.value, it), "put the netdev (e.g. net1, from ibdev2netdev) in NCCL_SOCKET_IFNAME and the verbs device in NCCL_IB_HCA")
				}
			}
		}
		if e, ok := ct.env["NCCL_IB_HCA"]; ok && e.literal {
			for _, it := range parseFilter(e.value).items {
				if netdevNameRE.MatchString(it) {
					c.add("RDMA075", w.obj, e.field, fmt.Sprintf("NCCL_IB_HCA=%q names %q, a network interface; NCCL_IB_HCA filters verbs devices (mlx5_0, ...)", e.value, it), "put verbs device names (ibdev2netdev, left column) in NCCL_IB_HCA and the interface in NCCL_SOCKET_IFNAME")
				}
			}
		}
		if e, ok := ct.env["NCCL_IB_GID_INDEX"]; ok && strings.TrimSpace(e.value) != "" {
			if w.onInfiniBand() {
				c.addSev("RDMA070", Info, w.obj, e.field, fmt.Sprintf("NCCL_IB_GID_INDEX=%s on an InfiniBand pool: IB has no RoCE v1/v2 GID ambiguity, the variable is not needed", e.value), "remove NCCL_IB_GID_INDEX")
			} else {
				c.add("RDMA070", w.obj, e.field, fmt.Sprintf("NCCL_IB_GID_INDEX=%s is hard-coded; the RoCEv2 IPv4 GID index depends on driver, OFED and port configuration and differs between machines — a wrong one lets NCCL initialise, then time out or crawl", e.value), "remove it, or derive it per node from show_gids (VER v2 with an IPv4 address; kubectl rdma doctor prints it)")
			}
		}
	}
	if dis, ok := w.ibDisabled(); ok {
		var what []string
		for _, r := range w.rdmaResources() {
			what = append(what, r.name)
		}
		for _, u := range w.draNICs() {
			what = append(what, u.String())
		}
		for _, n := range w.nets {
			if n.nad != nil && nadKind(n.nad) != "" {
				what = append(what, n.nad.Ref())
			}
		}
		if len(what) > 0 {
			c.add("RDMA071", w.obj, dis.field, fmt.Sprintf("%s=%q makes NCCL use TCP sockets, yet the pod holds %s", dis.name, dis.value, strings.Join(what, ", ")), "remove it (or set NCCL_IB_DISABLE=0) unless this is a deliberate socket baseline")
		}
	}
	if w.hostNetwork() {
		if e, ok := w.env("NCCL_SOCKET_IFNAME"); ok {
			f := parseFilter(e.value)
			for _, it := range f.items {
				if !f.exclude && multusName.MatchString(it) {
					c.addSev("RDMA073", Warning, w.obj, e.field, fmt.Sprintf("NCCL_SOCKET_IFNAME=%q names %q, the name Multus gives a secondary interface inside a pod's own netns; a hostNetwork pod sees the node's interfaces, which rarely carry that name", e.value, it), "set it to the node's interface on the RDMA NIC (ibdev2netdev), or eth0 as the seeds' host route does")
					break
				}
			}
		}
	}
	// Interface rules apply to pods with their own netns.
	if !w.hostNetwork() && w.netsErr == nil {
		sec := w.secondaryIfaces()
		e, has := w.env("NCCL_SOCKET_IFNAME")
		switch {
		case has:
			ifaces := w.interfaces()
			if len(w.nets) > 0 && w.netsKey == manifest.TKENetworksAnnotation {
				for _, n := range w.nets {
					if n.sel.Interface == "" {
						ifaces = nil // vendor-named interface: cannot tell
					}
				}
			}
			got := matching(e.value, append([]string{"lo"}, ifaces...))
			if ifaces != nil && len(got) == 0 {
				c.add("RDMA073", w.obj, e.field, fmt.Sprintf("NCCL_SOCKET_IFNAME=%q selects none of the pod's interfaces (%s); NCCL bootstrap fails to find a socket interface", e.value, strings.Join(ifaces, ", ")), fmt.Sprintf("make it match the annotation's interface, e.g. NCCL_SOCKET_IFNAME=\"=%s\"", cmp.Or(firstOf(sec), "eth0")))
			} else if len(sec) > 0 && contains(got, "eth0") {
				c.add("RDMA072", w.obj, e.field, fmt.Sprintf("NCCL_SOCKET_IFNAME=%q selects eth0 although the pod has the training interface %s; NCCL bootstrap and socket traffic run on the pod network", e.value, strings.Join(sec, ", ")), fmt.Sprintf("set NCCL_SOCKET_IFNAME=\"=%s\"", sec[0]))
			}
		case len(sec) > 0 && (w.isRDMA() || w.mode == ModeUnknown):
			field := w.t.Field("spec.containers")
			if cs := w.rdmaContainers(); len(cs) > 0 {
				field = cs[0].field + ".env"
			}
			c.add("RDMA074", w.obj, field, fmt.Sprintf("the pod has the training interface %s but NCCL_SOCKET_IFNAME is unset; NCCL picks an interface by its own order, often eth0", strings.Join(sec, ", ")), fmt.Sprintf("add NCCL_SOCKET_IFNAME=\"=%s\"", sec[0]))
		}
	}
	if w.mode == ModeExclusive {
		if e, ok := w.env("NCCL_IB_HCA"); ok {
			f := parseFilter(e.value)
			if !f.exclude {
				for _, it := range f.items {
					if f.exact || exactHCA.MatchString(it) {
						c.add("RDMA076", w.obj, e.field, fmt.Sprintf("NCCL_IB_HCA=%q pins device %q; the VF's RDMA device name differs per node and per allocation, and with one VF in the pod NCCL needs no filter", e.value, it), "remove NCCL_IB_HCA, or use a prefix such as \"mlx5\"")
						break
					}
				}
			}
		}
	}
	if w.mode == ModeTCP && w.gpus() > 0 {
		if _, explicit := w.ibDisabled(); !explicit {
			c.add("RDMA078", w.obj, w.t.Field("spec"), fmt.Sprintf("GPU workload (%d GPUs per pod) with no RDMA resource, secondary network or hostNetwork: cross-node collectives run over TCP sockets on eth0", w.gpus()), "")
		}
	}
}

func (w *workload) onInfiniBand() bool {
	for _, r := range w.rdmaResources() {
		if poolIsIB(r.pool) {
			return true
		}
	}
	for _, n := range w.nets {
		if n.nad != nil && (n.nad.Config.Has("ib-sriov") || n.nad.Config.Has("ipoib")) {
			return true
		}
	}
	return false
}

func poolIsIB(p *manifest.Pool) bool {
	if p == nil {
		return false
	}
	for _, lt := range p.LinkTypes {
		if isIBLink(lt) {
			return true
		}
	}
	return false
}

func isIBLink(lt string) bool {
	l := strings.ToLower(lt)
	return l == "ib" || l == "infiniband"
}

func isTrue(s string) bool { return strings.EqualFold(strings.TrimSpace(s), "true") }

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func firstOf(xs []string) string {
	if len(xs) == 0 {
		return ""
	}
	return xs[0]
}

func orDefault(ns string) string {
	if ns == "" {
		return "<namespace of kubectl context>"
	}
	return ns
}

func quoteVal(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return fmt.Sprintf("%q", s)
}

func nadKindForResource(w *workload, rn string) string {
	for _, n := range w.nets {
		if n.nad != nil && n.nad.ResourceName == rn {
			return nadKind(n.nad)
		}
	}
	return ""
}
