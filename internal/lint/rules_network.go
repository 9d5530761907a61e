package lint

import (
	"fmt"
	"strings"

	"github.com/rdmanet/rdmanet/internal/manifest"
)

// ipam types that coordinate addresses across nodes.
var clusterIPAM = map[string]bool{"rdmanet-ipam": true, "whereabouts": true, "spiderpool": true, "nv-ipam": true, "dhcp": true, "static": true}

// main plugins of a secondary RDMA network (the ones that create net1).
var ifacePlugins = map[string]bool{"sriov": true, "ib-sriov": true, "macvlan": true, "ipvlan": true, "ipoib": true, "host-device": true}

func (c *checker) checkNADs() {
	c.cur = -1
	for _, n := range c.in.nads {
		o := n.Obj
		cfgField := n.ConfigField
		if n.ConfigErr != nil {
			sev := Error
			if strings.TrimSpace(manifest.GetString(o.Data, "spec.config")) == "" && !n.Generated {
				sev = Info
			}
			c.addSev("RDMA002", sev, o, cfgField, fmt.Sprintf("%s: %v", n.Ref(), n.ConfigErr), "")
		}
		if n.Config == nil {
			continue
		}
		pools := c.in.poolsNamed(n.ResourceName)
		field := func(i int, key string) string {
			if n.Generated {
				return cfgField
			}
			f := n.Config.PluginPath(i)
			if key != "" {
				f += "." + key
			}
			return f
		}
		for _, p := range n.Config.Plugins {
			c.checkCNIKeys(n, p, field) // RDMA029
			switch p.Type {
			case "sriov", "ib-sriov", "rdma":
				for _, k := range []string{"deviceID", "pciBusID"} {
					if v, ok := p.Raw[k]; ok {
						c.add("RDMA030", o, field(p.Index, k), fmt.Sprintf("%s: the %s plugin has %s %v written statically; the device plugin allocates the VF and Multus injects its PCI address per pod, so every pod would fight for this one device", n.Ref(), p.Type, k, v), fmt.Sprintf("remove %q and annotate the NAD with %s", k, manifest.ResourceNameAnnotation))
					}
				}
			}
			if p.Type == "sriov" || p.Type == "ib-sriov" {
				if n.ResourceName == "" {
					f := "metadata.annotations[" + manifest.ResourceNameAnnotation + "]"
					if n.Generated {
						f = "spec.resourceName"
						if o.Kind == "SpiderMultusConfig" {
							f = "spec.sriov.resourceName"
						}
					}
					c.add("RDMA031", o, f, fmt.Sprintf("%s uses the %s plugin but has no %s annotation; Multus cannot pass the allocated VF's deviceID to the chain", n.Ref(), p.Type, manifest.ResourceNameAnnotation), fmt.Sprintf("annotate %s: <resourcePrefix>/<resourceName> of the VF pool", manifest.ResourceNameAnnotation))
				}
			}
			if p.Type == "rdma" {
				sriovAt := -1
				for _, q := range n.Config.Plugins {
					if (q.Type == "sriov" || q.Type == "ib-sriov") && q.Index < p.Index {
						sriovAt = q.Index
					}
				}
				if sriovAt < 0 {
					var types []string
					for _, q := range n.Config.Plugins {
						types = append(types, q.Type)
					}
					c.add("RDMA032", o, field(p.Index, "type"), fmt.Sprintf("%s chains the rdma plugin without an sriov plugin before it (chain: %s); the RDMA CNI moves the RDMA device of the VF that sriov configured and has nothing to move", n.Ref(), strings.Join(types, " → ")), "put the sriov plugin first and rdma after it; for a shared HCA (macvlan) drop the rdma step — the RDMA subsystem is in shared netns mode there")
				}
			}
			if ifacePlugins[p.Type] {
				c.checkIPAM(n, p, field(p.Index, "ipam"))
			}
		}
		// RDMA033: sriov without the rdma step.
		if si := n.Config.Index("sriov"); si >= 0 && !n.Config.Has("rdma") {
			isRdma, known := false, false
			for _, p := range pools {
				if p.Kind == manifest.PoolExclusive {
					known = true
					isRdma = isRdma || p.IsRdma
				}
			}
			switch {
			case isRdma:
				c.add("RDMA033", o, cfgField, fmt.Sprintf("%s attaches VFs of the RDMA pool %s (isRdma: true) with sriov only; in exclusive netns mode the VF's RDMA device stays in the host netns, NCCL sees no HCA and falls back to sockets", n.Ref(), n.ResourceName), "append {\"type\": \"rdma\"} after the sriov plugin")
			case !known:
				c.addSev("RDMA033", Warning, o, cfgField, fmt.Sprintf("%s has an sriov plugin without the rdma step; if it carries RDMA traffic, the VF's RDMA device is not moved into the pod", n.Ref()), "append {\"type\": \"rdma\"} after the sriov plugin")
			}
		}
		// RDMA011, RDMA034, RDMA046
		if n.ResourceName != "" && len(c.in.pools) > 0 && len(pools) == 0 {
			var have []string
			for _, p := range c.in.pools {
				have = append(have, p.FullName())
			}
			c.add("RDMA011", o, n.ResourceField, fmt.Sprintf("%s names resource %s, but no device plugin pool in the input defines it (pools: %s)", n.Ref(), n.ResourceName, strings.Join(have, ", ")), fmt.Sprintf("set the annotation to one of %s, or add the pool", strings.Join(have, ", ")))
		}
		kind := nadKind(n)
		for _, p := range pools {
			switch {
			case kind == resExclusive && p.Kind == manifest.PoolShared:
				c.add("RDMA034", o, n.ResourceField, fmt.Sprintf("%s runs the sriov plugin but its resource %s is a shared-HCA pool (%s %s); that pool hands out HCA slots, not VFs, so sriov gets no VF deviceID", n.Ref(), n.ResourceName, p.Obj.Ref(), p.Field), "point the annotation at a VF pool (resourceList), or use a macvlan NAD for the shared pool")
			case kind == resShared && p.Kind == manifest.PoolExclusive:
				c.add("RDMA034", o, n.ResourceField, fmt.Sprintf("%s is a %s network but its resource %s is a VF pool (%s %s); every pod would hold a VF the macvlan never uses", n.Ref(), n.Config.Plugins[0].Type, n.ResourceName, p.Obj.Ref(), p.Field), "point the annotation at a shared pool (configList), or use an sriov+rdma NAD")
			}
			if n.Config.Has("rdma") && p.Kind == manifest.PoolExclusive && !p.IsRdma {
				c.add("RDMA046", p.Obj, p.Field+".selectors", fmt.Sprintf("pool %s backs %s, which chains the rdma plugin, but does not select isRdma: true; VFs without an RDMA device can be allocated", p.FullName(), n.Ref()), "add \"isRdma\": true to the pool's selectors")
			}
		}
		c.checkMacvlan(n, pools)
		c.checkIPoIB(n, pools) // RDMA100, RDMA101
	}
	// RDMA043: exclusive and shared networks in one input.
	var excl, shared []*manifest.NAD
	for _, n := range c.in.nads {
		switch {
		case n.Config.Has("rdma") && (n.Config.Has("sriov") || n.Config.Has("ib-sriov")):
			excl = append(excl, n)
		case nadKind(n) == resShared && n.Config.Index("ipoib") < 0:
			shared = append(shared, n)
		}
	}
	if len(excl) > 0 {
		for _, n := range shared {
			c.add("RDMA043", n.Obj, n.ConfigField, fmt.Sprintf("%s shares HCAs (needs rdma system netns shared) while %s moves VF RDMA devices into pods (needs netns exclusive); the mode is node-wide, so a node can serve only one of them", n.Ref(), excl[0].Ref()), "")
		}
	}
}

func (c *checker) checkIPAM(n *manifest.NAD, p manifest.CNIPlugin, field string) {
	o := n.Obj
	ipam := p.IPAM()
	typ, _ := ipam["type"].(string)
	if typ == "" {
		c.add("RDMA036", o, field, fmt.Sprintf("%s: the %s plugin has no ipam; the secondary interface gets no address, so there is no RoCEv2 IPv4 GID and NCCL bootstrap on it fails", n.Ref(), p.Type), "add \"ipam\": {\"type\": \"rdmanet-ipam\", \"range\": \"<training subnet>\"}")
		return
	}
	c.checkClusterIPAM(n, p, field)
	if typ == "host-local" {
		c.add("RDMA037", o, field+".type", fmt.Sprintf("%s uses host-local IPAM; it allocates per node, so pods on different nodes get the same addresses from range %v", n.Ref(), ipamRange(ipam)), "use \"type\": \"rdmanet-ipam\" (or whereabouts) with the same range")
	}
	routes, _ := ipam["routes"].([]any)
	for i, r := range routes {
		rm, _ := r.(map[string]any)
		dst, _ := rm["dst"].(string)
		if dst == "0.0.0.0/0" || dst == "::/0" {
			f := fmt.Sprintf("%s.routes[%d]", field, i)
			if n.Generated {
				f = "spec.ipam"
			}
			c.add("RDMA035", o, f, fmt.Sprintf("%s: ipam route %s makes the training net the default route; DNS, image pulls and control traffic would leave through it instead of eth0", n.Ref(), dst), fmt.Sprintf("remove the %s route", dst))
		}
	}
}

func ipamRange(ipam map[string]any) any {
	if r, ok := ipam["range"]; ok {
		return r
	}
	if r, ok := ipam["subnet"]; ok {
		return r
	}
	if r, ok := ipam["ranges"]; ok {
		return r
	}
	return "(none)"
}

// RDMA038, RDMA039, RDMA040
func (c *checker) checkMacvlan(n *manifest.NAD, pools []*manifest.Pool) {
	o := n.Obj
	kind := ""
	for _, p := range n.Config.Plugins {
		if p.Type == "macvlan" || p.Type == "ipvlan" {
			kind = p.Type
		}
	}
	// Ethernet sriov CNI on an IB pool.
	if n.Config.Has("sriov") {
		for _, p := range pools {
			if poolIsIB(p) {
				c.add("RDMA038", o, n.ConfigField, fmt.Sprintf("%s uses the Ethernet sriov plugin, but its pool %s selects InfiniBand links (linkTypes %s); IB VFs have no MAC/VLAN to configure", n.Ref(), p.FullName(), quoteList(p.LinkTypes)), "use {\"type\": \"ib-sriov\"} for InfiniBand VFs")
			}
		}
	}
	if kind == "" {
		return
	}
	masterField := n.MasterField
	if masterField == "" {
		masterField = n.ConfigField
	}
	if n.Master != "" {
		ib := ""
		if strings.HasPrefix(n.Master, "ib") {
			ib = "its name is an IPoIB interface name"
		}
		for _, p := range c.in.pools {
			if poolIsIB(p) && contains(p.Interfaces(), n.Master) {
				ib = fmt.Sprintf("pool %s selects it with linkTypes %s", p.FullName(), quoteList(p.LinkTypes))
			}
		}
		if ib != "" {
			c.add("RDMA038", o, masterField, fmt.Sprintf("%s puts %s on master %q, an InfiniBand interface (%s); %s multiplexes by MAC address and IPoIB has none, so the child interface cannot be created", n.Ref(), kind, n.Master, ib, kind), "on InfiniBand use the ipoib CNI (IPoIB + pkey child) or ib-sriov; keep macvlan for RoCE")
		}
	}
	// master vs shared pool interfaces
	var shared []*manifest.Pool
	for _, p := range pools {
		if p.Kind == manifest.PoolShared {
			shared = append(shared, p)
		}
	}
	if len(shared) == 0 && n.ResourceName == "" {
		for _, p := range c.in.pools {
			if p.Kind == manifest.PoolShared {
				shared = append(shared, p)
			}
		}
	}
	var ifs []string
	for _, p := range shared {
		ifs = append(ifs, p.IfNames...)
	}
	if n.Master != "" && len(ifs) > 0 && !contains(ifs, n.Master) {
		c.add("RDMA039", o, masterField, fmt.Sprintf("%s puts %s on %q, but the shared RDMA pool selects %s; the pod's IP (and so its RoCE GID) would not be on the HCA it is given", n.Ref(), kind, n.Master, quoteList(ifs)), fmt.Sprintf("set master to %q, the interface of the shared HCA", ifs[0]))
	}
	if kind == "macvlan" {
		switch {
		case n.MTU > 0 && n.MTU < 9000:
			c.add("RDMA040", o, strings.TrimSuffix(masterField, ".master")+".mtu", fmt.Sprintf("%s sets mtu %d; RoCE bulk transfers are most efficient with jumbo frames (9000) matching NIC and switch", n.Ref(), n.MTU), "")
		case n.MTU == 0 && o.Kind == "MacvlanNetwork":
			c.add("RDMA040", o, "spec.mtu", fmt.Sprintf("%s leaves spec.mtu unset; set it to the NIC's and switches' MTU (9000 for jumbo frames)", n.Ref()), "")
		}
	}
}

// RDMA003, RDMA045
func (c *checker) checkPools() {
	c.cur = -1
	// pool configs are judged by the agent's parser (config.ParseFile):
	// what it refuses is an error with its message, what it warns about a
	// warning naming the key or pool
	for _, e := range c.in.poolErrs {
		if e.Warning {
			c.addSev("RDMA003", Warning, e.Obj, e.Field, e.Err.Error(), "")
			continue
		}
		c.add("RDMA003", e.Obj, e.Field, e.Err.Error(), "")
	}
	for _, p := range c.in.pools {
		if !p.HasSelector {
			c.add("RDMA003", p.Obj, p.Field+".selectors", fmt.Sprintf("pool %s has no selectors; it would claim every matching device on every node, including NICs another pool or the node itself uses", p.FullName()), "select the PFs explicitly (pfNames / ifNames) plus vendors")
		}
	}
	for _, e := range c.in.pools {
		if e.Kind != manifest.PoolExclusive {
			continue
		}
		for _, s := range c.in.pools {
			if s.Kind != manifest.PoolShared {
				continue
			}
			common := manifest.Intersect(e.PFNames, s.IfNames)
			common = append(common, manifest.Intersect(e.RootDevices, s.RootDevices)...)
			if len(common) > 0 {
				c.add("RDMA045", s.Obj, s.Field+".selectors", fmt.Sprintf("shared pool %s (%s) and VF pool %s (%s %s) both select %s; two device plugins would report the same HCA into two inconsistent resource models", s.FullName(), s.Obj.Ref(), e.FullName(), e.Obj.Ref(), e.Field, quoteList(common)), "split the PFs: each interface in exactly one pool")
				continue
			}
			eNarrow := len(e.PFNames)+len(e.RootDevices) > 0
			sNarrow := len(s.IfNames)+len(s.RootDevices) > 0
			if eNarrow && sNarrow {
				continue
			}
			if len(e.Vendors) > 0 && len(s.Vendors) > 0 && len(manifest.Intersect(e.Vendors, s.Vendors)) == 0 {
				continue
			}
			c.addSev("RDMA045", Warning, s.Obj, s.Field+".selectors", fmt.Sprintf("shared pool %s and VF pool %s select devices by vendor/device only on at least one side, so they may cover the same HCA", s.FullName(), e.FullName()), "narrow both pools to disjoint PFs (pfNames / ifNames)")
		}
	}
}
