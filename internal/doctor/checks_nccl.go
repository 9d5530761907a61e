package doctor

// The NCCL layer: the NCCL_* environment against the node's devices,
// ports and GIDs (nccl).

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/rdmanet/rdmanet/internal/inventory"
	"github.com/rdmanet/rdmanet/internal/lint"
)

// ---- nccl ----

func (c *checker) nccl() {
	env := c.in.Env
	names, by := c.allDevices()

	// transport
	ibDisable, net := env["NCCL_IB_DISABLE"], env["NCCL_NET"]
	switch {
	case strings.EqualFold(net, "IB") && len(names) == 0:
		c.add(IDNCCLTransport, Fail, "NCCL_NET=IB but no RDMA device is visible: NCCL fails at init", "give the pod its RDMA device (resource request, rdma CNI) or drop NCCL_NET")
	case isTrue(ibDisable) && len(names) > 0:
		c.add(IDNCCLTransport, Warn, fmt.Sprintf("NCCL_IB_DISABLE=%s: NCCL uses TCP sockets although %d RDMA device(s) exist (tcp mode)", ibDisable, len(names)), "unset NCCL_IB_DISABLE or set it to 0 (keep it only for a socket baseline run)")
	case strings.EqualFold(net, "Socket") && len(names) > 0:
		c.add(IDNCCLTransport, Warn, fmt.Sprintf("NCCL_NET=Socket: NCCL uses TCP sockets although %d RDMA device(s) exist", len(names)), "unset NCCL_NET (or NCCL_NET=IB)")
	case len(names) == 0 && !isTrue(ibDisable) && !strings.EqualFold(net, "Socket"):
		c.add(IDNCCLTransport, Warn, "RDMA is not disabled but no RDMA device is visible: NCCL falls back to TCP sockets silently", "make the RDMA device visible (see rdma-devices), or set NCCL_IB_DISABLE=1 to make the socket transport explicit")
	case isTrue(ibDisable) || strings.EqualFold(net, "Socket"):
		c.add(IDNCCLTransport, Pass, "socket transport requested and no RDMA device visible", "")
	default:
		v := "NCCL_IB_DISABLE unset"
		if ibDisable != "" {
			v = "NCCL_IB_DISABLE=" + ibDisable
		}
		c.add(IDNCCLTransport, Pass, v+": NCCL can use the IB/RoCE transport", "")
	}

	// NCCL_IB_HCA
	selected := names
	if hca, ok := env["NCCL_IB_HCA"]; ok {
		selected = c.checkHCA(hca, names, by)
	} else if len(names) > 0 {
		c.add(IDNCCLIBHCA, Pass, fmt.Sprintf("unset: NCCL uses every visible device (%s)", strings.Join(limit(names, 8), ", ")), "")
	}

	// NCCL_SOCKET_IFNAME
	if v, ok := env["NCCL_SOCKET_IFNAME"]; ok {
		c.checkSocketIf(v)
	} else {
		c.add(IDNCCLSocketIf, Pass, "unset: NCCL picks the bootstrap interface itself (ib* first, then any but lo/docker*); set it to net1 (pod) or the node's NIC (hostNetwork) to be sure", "")
	}

	// NCCL_IB_GID_INDEX
	c.checkGIDIndex(env, selected, by)
}

func (c *checker) checkHCA(hca string, names []string, by map[string]*inventory.Function) []string {
	items, exclude := filterItems(hca)
	var netdevItems []string
	for _, it := range items {
		name := it.name
		if lint.IsVerbsDeviceName(name) {
			continue
		}
		if _, isNetdev := c.in.Netdevs[name]; isNetdev || c.node.ByNetdev(name) != nil {
			netdevItems = append(netdevItems, name)
		}
	}
	if len(netdevItems) > 0 {
		var want []string
		for _, nd := range netdevItems {
			if f := c.node.ByNetdev(nd); f != nil && f.HasRDMA() {
				want = append(want, nd+" → "+f.RDMAName())
			}
		}
		fix := "NCCL_IB_HCA takes RDMA device names (left column of ibdev2netdev)"
		if len(want) > 0 {
			fix += ": " + strings.Join(want, ", ")
		}
		c.add(IDNCCLIBHCA, Fail, fmt.Sprintf("NCCL_IB_HCA=%s names network interface(s) %s, not RDMA devices: NCCL finds no HCA and falls back to sockets", hca, strings.Join(netdevItems, ", ")), fix)
		return nil
	}
	var sel []string
	for _, n := range names {
		if lint.FilterSelects(hca, n) {
			sel = append(sel, n)
		}
	}
	if len(sel) == 0 {
		c.add(IDNCCLIBHCA, Fail, fmt.Sprintf("NCCL_IB_HCA=%s selects none of the visible RDMA devices (%s): NCCL falls back to sockets", hca, orDash(strings.Join(limit(names, 8), ", "))),
			"set NCCL_IB_HCA to devices that exist here (ibdev2netdev), or leave it unset")
		return nil
	}
	if !exclude {
		for _, it := range items {
			if it.port == 0 {
				continue
			}
			for _, n := range names {
				if !(n == it.name || (!strings.HasPrefix(hca, "=") && strings.HasPrefix(n, it.name))) {
					continue
				}
				if !hasPort(by[n], n, it.port) {
					c.add(IDNCCLIBHCA, Fail, fmt.Sprintf("NCCL_IB_HCA=%s asks for port %d of %s, which has no such port", hca, it.port, n), "use the port numbers `ibstat "+n+"` lists (usually 1)")
					return sel
				}
			}
		}
	}
	if !exclude && !strings.HasPrefix(strings.TrimSpace(hca), "=") {
		var extra []string
		for _, it := range items {
			exact := false
			var more []string
			for _, n := range sel {
				if n == it.name {
					exact = true
				} else if strings.HasPrefix(n, it.name) {
					more = append(more, n)
				}
			}
			if exact && len(more) > 0 {
				extra = append(extra, fmt.Sprintf("%s also selects %s", it.name, strings.Join(limit(more, 4), ", ")))
			}
		}
		if len(extra) > 0 {
			c.add(IDNCCLIBHCA, Warn, fmt.Sprintf("NCCL_IB_HCA=%s: entries are prefixes, so %s", hca, strings.Join(extra, "; ")),
				fmt.Sprintf("start the list with = to match exact names: NCCL_IB_HCA==%s", strings.TrimSpace(hca)))
			return sel
		}
	}
	var down []string
	for _, n := range sel {
		for _, d := range by[n].RDMA {
			if d.Name != n {
				continue
			}
			for _, p := range d.Ports {
				if p.State != "ACTIVE" {
					down = append(down, fmt.Sprintf("%s port %d (%s)", n, p.Num, orDash(p.State)))
				}
			}
		}
	}
	if len(down) > 0 {
		c.add(IDNCCLIBHCA, Warn, fmt.Sprintf("NCCL_IB_HCA=%s selects %s, but not every port is ACTIVE: %s", hca, strings.Join(limit(sel, 8), ", "), strings.Join(down, ", ")),
			"bring the ports up (see port-state) or leave them out of NCCL_IB_HCA")
		return sel
	}
	c.add(IDNCCLIBHCA, Pass, fmt.Sprintf("NCCL_IB_HCA=%s selects %s", hca, strings.Join(limit(sel, 8), ", ")), "")
	return sel
}

func hasPort(f *inventory.Function, dev string, port int) bool {
	if f == nil {
		return false
	}
	for _, d := range f.RDMA {
		if d.Name != dev {
			continue
		}
		for _, p := range d.Ports {
			if p.Num == port {
				return true
			}
		}
	}
	return false
}

type filterItem struct {
	name string
	port int
}

func filterItems(v string) (items []filterItem, exclude bool) {
	v = strings.TrimSpace(v)
	if strings.HasPrefix(v, "^") {
		exclude, v = true, v[1:]
	}
	v = strings.TrimPrefix(v, "=")
	for _, it := range strings.Split(v, ",") {
		it = strings.TrimSpace(it)
		if it == "" {
			continue
		}
		fi := filterItem{name: it}
		if i := strings.IndexByte(it, ':'); i >= 0 {
			fi.name = it[:i]
			fi.port, _ = strconv.Atoi(it[i+1:])
		}
		items = append(items, fi)
	}
	return items, exclude
}

func (c *checker) checkSocketIf(v string) {
	var ifs []string
	for nd := range c.in.Netdevs {
		ifs = append(ifs, nd)
	}
	sort.Strings(ifs)
	items, _ := filterItems(v)
	for _, it := range items {
		if lint.IsVerbsDeviceName(it.name) {
			c.add(IDNCCLSocketIf, Fail, fmt.Sprintf("NCCL_SOCKET_IFNAME=%s names the RDMA device %s: it takes network interfaces", v, it.name),
				"use the netdev (ibdev2netdev's right column), e.g. net1 in an exclusive/shared pod")
			return
		}
	}
	var sel, up []string
	for _, nd := range ifs {
		if lint.FilterSelects(v, nd) {
			sel = append(sel, nd)
			if st := c.in.Netdevs[nd]; st == "up" || st == "unknown" {
				up = append(up, nd)
			}
		}
	}
	switch {
	case len(sel) == 0:
		c.add(IDNCCLSocketIf, Fail, fmt.Sprintf("NCCL_SOCKET_IFNAME=%s selects no interface here (have: %s): NCCL bootstrap fails (\"no socket interface found\")", v, orDash(strings.Join(limit(ifs, 8), ", "))),
			"set it to an interface that exists: net1 (the NAD's @ifname) in exclusive/shared pods, the node's NIC in hostNetwork pods; =name matches exactly, ^ excludes, otherwise prefixes")
	case len(up) == 0:
		c.add(IDNCCLSocketIf, Fail, fmt.Sprintf("NCCL_SOCKET_IFNAME=%s selects %s, none of which is up", v, strings.Join(sel, ", ")), "bring the interface up or select another one")
	default:
		c.add(IDNCCLSocketIf, Pass, fmt.Sprintf("NCCL_SOCKET_IFNAME=%s selects %s", v, strings.Join(limit(sel, 8), ", ")), "")
	}
}

func (c *checker) checkGIDIndex(env map[string]string, selected []string, by map[string]*inventory.Function) {
	type rec struct {
		name string
		idx  int
		ok   bool
		port inventory.Port
	}
	var roce []rec
	for _, n := range selected {
		f := by[n]
		if f == nil {
			continue
		}
		for _, d := range f.RDMA {
			if d.Name != n {
				continue
			}
			for _, p := range d.Ports {
				if p.LinkLayer != inventory.LinkEthernet {
					continue
				}
				i, ok := p.RecommendedGIDIndex()
				roce = append(roce, rec{fmt.Sprintf("%s port %d", n, p.Num), i, ok, p})
			}
		}
	}
	v, set := env["NCCL_IB_GID_INDEX"]
	idxs := map[int][]string{}
	var noRec []string
	for _, r := range roce {
		if r.ok {
			idxs[r.idx] = append(idxs[r.idx], r.name)
		} else {
			noRec = append(noRec, r.name)
		}
	}
	if len(roce) == 0 {
		if set {
			c.add(IDNCCLGIDIndex, Pass, fmt.Sprintf("NCCL_IB_GID_INDEX=%s is ignored: no selected RoCE port (InfiniBand needs no GID index)", v), "")
		} else if len(selected) > 0 {
			c.add(IDNCCLGIDIndex, Pass, "no selected RoCE port: InfiniBand needs no NCCL_IB_GID_INDEX", "")
		}
		return
	}
	keys := make([]int, 0, len(idxs))
	for k := range idxs {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	layout := func() string {
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%d on %s", k, strings.Join(limit(idxs[k], 4), ", ")))
		}
		return strings.Join(parts, "; ")
	}
	if !set {
		switch len(keys) {
		case 0:
			c.add(IDNCCLGIDIndex, Warn, "unset, and no selected RoCE port has a RoCEv2 IPv4 GID", "give the training netdevs their IPv4 addresses (see roce-gid)")
		case 1:
			c.add(IDNCCLGIDIndex, Pass, fmt.Sprintf("unset: NCCL ≥ 2.21 finds the RoCEv2 GID itself; older NCCL needs NCCL_IB_GID_INDEX=%d (the RoCEv2 IPv4 index of the selected ports)", keys[0]), "")
		default:
			c.add(IDNCCLGIDIndex, Warn, "unset, and the selected RoCE ports keep their RoCEv2 IPv4 GID at different indexes ("+layout()+"): one NCCL_IB_GID_INDEX cannot fit all",
				"use NCCL ≥ 2.21 (dynamic GID selection), or restrict NCCL_IB_HCA to ports with the same layout")
		}
		return
	}
	want, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || want < 0 {
		c.add(IDNCCLGIDIndex, Fail, fmt.Sprintf("NCCL_IB_GID_INDEX=%q is not a GID index", v), "set it to the RoCEv2 IPv4 index show_gids lists, or unset it")
		return
	}
	var wrong []string
	for _, k := range keys {
		if k != want {
			for _, n := range idxs[k] {
				wrong = append(wrong, fmt.Sprintf("%s has it at %d", n, k))
			}
		}
	}
	if len(wrong) > 0 {
		fix := "set NCCL_IB_GID_INDEX to the index of the v2 row with an IPv4 address in show_gids"
		if len(keys) == 1 {
			fix = fmt.Sprintf("NCCL_IB_GID_INDEX=%d (or unset it with NCCL ≥ 2.21)", keys[0])
		}
		what := ""
		for _, r := range roce {
			for _, g := range r.port.GIDs {
				if g.Index == want {
					what = fmt.Sprintf(" (index %d is RoCE %s%s on %s)", want, g.Type, ifStr(g.IPv4 == "", ", no IPv4", " "+g.IPv4), r.name)
					break
				}
			}
			if what != "" {
				break
			}
		}
		c.add(IDNCCLGIDIndex, Fail, fmt.Sprintf("NCCL_IB_GID_INDEX=%d but the RoCEv2 IPv4 GID is elsewhere: %s%s; NCCL initialises but connections time out or crawl", want, strings.Join(limit(wrong, 6), ", "), what), fix)
		return
	}
	if len(keys) == 0 {
		c.add(IDNCCLGIDIndex, Fail, fmt.Sprintf("NCCL_IB_GID_INDEX=%d but no selected RoCE port has a RoCEv2 IPv4 GID (%s)", want, strings.Join(limit(noRec, 6), ", ")), "give the training netdevs their IPv4 addresses (see roce-gid)")
		return
	}
	msg := fmt.Sprintf("NCCL_IB_GID_INDEX=%d is the RoCEv2 IPv4 index of %s", want, strings.Join(limit(idxs[want], 6), ", "))
	if len(noRec) > 0 && env["NCCL_IB_HCA"] != "" {
		c.add(IDNCCLGIDIndex, Warn, msg+fmt.Sprintf("; but %s have no RoCEv2 IPv4 GID", strings.Join(limit(noRec, 6), ", ")), "give those netdevs IPv4 addresses or leave them out of NCCL_IB_HCA")
		return
	}
	c.add(IDNCCLGIDIndex, Pass, msg, "")
}
