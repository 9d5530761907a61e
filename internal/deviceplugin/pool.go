// Package deviceplugin turns the node inventory and the pool configuration
// into Kubernetes device plugin resources: it selects devices, refuses
// configurations that would hand one device out twice, computes health,
// prefers topology-aligned allocations and serves each pool over the
// Device Plugin API v1beta1.
package deviceplugin

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/rdmanet/rdmanet/internal/deviceplugin/config"
	"github.com/rdmanet/rdmanet/internal/inventory"
)

// Health values as kubelet spells them.
const (
	Healthy   = "Healthy"
	Unhealthy = "Unhealthy"
)

// Device is one schedulable unit of a pool: a VF (exclusive) or a slot (shared).
type Device struct {
	ID        string `json:"id"`
	PCI       string `json:"pci,omitempty"`
	PF        string `json:"pf,omitempty"`
	PFNetdev  string `json:"pf_netdev,omitempty"`
	VFIndex   int    `json:"vf_index,omitempty"`
	Netdev    string `json:"netdev,omitempty"`
	RDMA      string `json:"rdma,omitempty"`
	LinkLayer string `json:"link_layer,omitempty"`
	NUMA      int    `json:"numa"`
	// NUMAs lists every NUMA node a shared slot spans (one per HCA's node).
	NUMAs    []int    `json:"numa_nodes,omitempty"`
	PCIRoot  string   `json:"pci_root,omitempty"`
	Upstream string   `json:"pci_parent,omitempty"`
	CharDevs []string `json:"char_devices,omitempty"`
	Health   string   `json:"health"`
	Reason   string   `json:"reason,omitempty"` // why Unhealthy
}

// HCA is a shared pool's physical device; every slot grants all HCAs.
type HCA struct {
	PCI       string   `json:"pci"`
	Netdev    string   `json:"netdev,omitempty"`
	RDMA      string   `json:"rdma"`
	LinkLayer string   `json:"link_layer,omitempty"`
	NUMA      int      `json:"numa"`
	CharDevs  []string `json:"char_devices,omitempty"`
	Health    string   `json:"health"`
	Reason    string   `json:"reason,omitempty"`
}

// Pool is a configured resource with its selected devices.
type Pool struct {
	Spec       config.Pool `json:"-"`
	Resource   string      `json:"resource"`
	Kind       string      `json:"kind"`
	Devices    []Device    `json:"devices"`
	HCAs       []HCA       `json:"hcas,omitempty"`
	Advertised bool        `json:"advertised"`
	Problems   []string    `json:"problems"`
}

// OverlapError is returned when two pools would hand out the same device.
type OverlapError struct {
	PCI, PoolA, PoolB, Detail string
}

func (e *OverlapError) Error() string {
	return fmt.Sprintf("pools %s and %s both claim %s%s: two device plugins managing one HCA/VF corrupt the resource model; "+
		"fix: narrow the selectors (pfNames with VF ranges, pciAddresses, ifNames) so each device belongs to one pool",
		e.PoolA, e.PoolB, e.PCI, e.Detail)
}

// Build selects devices for every pool. It fails when two pools overlap;
// per-pool trouble (nothing selected, netns mode mismatch, default-route
// NIC excluded) is recorded in Problems and, where the pool cannot work,
// Advertised is false.
func Build(node *inventory.Node, specs []config.Pool) ([]*Pool, error) {
	pools := make([]*Pool, 0, len(specs))
	owner := map[string]string{} // PCI -> resource
	claim := func(pci, res, detail string) error {
		if prev, ok := owner[pci]; ok && prev != res {
			return &OverlapError{PCI: pci, PoolA: prev, PoolB: res, Detail: detail}
		}
		owner[pci] = res
		return nil
	}
	for _, spec := range specs {
		p := &Pool{Spec: spec, Resource: spec.Resource(), Kind: string(spec.Kind), Problems: []string{}}
		switch spec.Kind {
		case config.Exclusive:
			buildExclusive(node, p)
			for _, d := range p.Devices {
				if err := claim(d.PCI, p.Resource, ""); err != nil {
					return nil, err
				}
			}
		case config.Shared:
			buildShared(node, p)
			for _, h := range p.HCAs {
				if err := claim(h.PCI, p.Resource, ""); err != nil {
					return nil, err
				}
			}
		}
		pools = append(pools, p)
	}
	// A shared pool over a PF whose VFs an exclusive pool serves: the PF's
	// RDMA device would be shared while its VFs are handed out exclusively.
	for _, p := range pools {
		if p.Spec.Kind != config.Shared {
			continue
		}
		for _, h := range p.HCAs {
			f := node.Function(h.PCI)
			if f == nil {
				continue
			}
			for _, vf := range f.VFs {
				if res, ok := owner[vf]; ok && res != p.Resource {
					return nil, &OverlapError{PCI: h.PCI, PoolA: res, PoolB: p.Resource,
						Detail: fmt.Sprintf(" (%s shares the PF while %s hands out its VF %s)", p.Resource, res, vf)}
				}
			}
		}
	}
	for _, p := range pools {
		gate(node, p)
	}
	return pools, nil
}

func gate(node *inventory.Node, p *Pool) {
	n := len(p.Devices)
	if p.Spec.Kind == config.Shared {
		n = len(p.HCAs)
	}
	if n == 0 {
		p.Problems = append(p.Problems, "selectors match no device on this node; the pool is not advertised (check the names with `ip -br link` and `lspci -nn`, or run with --once -o json)")
		return
	}
	p.Advertised = true
	if !p.Spec.NeedsRDMA() {
		return
	}
	want := inventory.NetnsExclusive
	if p.Spec.Kind == config.Shared {
		want = inventory.NetnsShared
	}
	switch node.RDMANetnsMode {
	case want:
	case inventory.NetnsUnknown, "":
		p.Problems = append(p.Problems, fmt.Sprintf("RDMA netns mode is unknown; this %s pool needs %q (set it at boot: `rdma system set netns %s`; state it with --rdma-netns-mode)", p.Kind, want, want))
	default:
		p.Advertised = false
		p.Problems = append(p.Problems, fmt.Sprintf("RDMA subsystem is in %q netns mode but a %s pool needs %q; not advertised. Fix: `rdma system set netns %s` at boot (before any pod starts), or serve this hardware with a pool of the %s kind",
			node.RDMANetnsMode, p.Kind, want, want, other(p.Kind)))
	}
}

func other(kind string) string {
	if kind == string(config.Exclusive) {
		return "shared"
	}
	return "exclusive"
}

func linkTypeOf(f *inventory.Function) string {
	switch f.LinkLayer {
	case inventory.LinkEthernet:
		return config.LinkEther
	case inventory.LinkInfiniBand:
		return config.LinkInfiniBand
	}
	return ""
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func pfNetdev(node *inventory.Node, f *inventory.Function) string {
	if !f.IsVF {
		return f.Netdev()
	}
	if pf := node.Function(f.PF); pf != nil {
		return pf.Netdev()
	}
	return ""
}

func matchSriov(node *inventory.Node, f *inventory.Function, s config.SriovSelector) bool {
	if len(s.Vendors) > 0 && !contains(s.Vendors, f.Vendor) {
		return false
	}
	if len(s.Devices) > 0 && !contains(s.Devices, f.Device) {
		return false
	}
	if len(s.Drivers) > 0 && !contains(s.Drivers, f.Driver) {
		return false
	}
	if len(s.PCIAddresses) > 0 && !contains(s.PCIAddresses, f.BDF) {
		return false
	}
	if len(s.RootDevices) > 0 && (!f.IsVF || !contains(s.RootDevices, f.PF)) {
		return false
	}
	if len(s.LinkTypes) > 0 && !contains(s.LinkTypes, linkTypeOf(f)) {
		return false
	}
	if s.IsRdma && !rdmaCapable(node, f) {
		return false
	}
	if len(s.PFNames) > 0 && !matchPFName(s.PFNames, pfNetdev(node, f), f) {
		return false
	}
	return true
}

// matchPFName matches pfNames as the SR-IOV device plugin does: the PF's
// netdev name is compared regardless of case (strings.EqualFold), and only
// the first entry naming the PF decides which of its VFs are selected (the
// parser already drops later entries of the same PF, with a warning). A
// function without a PF netdev never matches.
func matchPFName(pfNames []config.PFName, name string, f *inventory.Function) bool {
	if name == "" {
		return false
	}
	for _, pf := range pfNames {
		if !strings.EqualFold(pf.Name, name) {
			continue
		}
		if pf.VFs == nil {
			return true
		}
		if !f.IsVF {
			return false
		}
		for _, i := range pf.VFs {
			if i == f.VFIndex {
				return true
			}
		}
		return false
	}
	return false
}

// rdmaCapable: the function has an RDMA device, or it is a VF of an RDMA
// PF (a VF whose RDMA device vanished stays in the pool, Unhealthy, rather
// than silently leaving it).
func rdmaCapable(node *inventory.Node, f *inventory.Function) bool {
	if f.HasRDMA() {
		return true
	}
	if f.IsVF {
		if pf := node.Function(f.PF); pf != nil {
			return pf.HasRDMA()
		}
	}
	return false
}

func buildExclusive(node *inventory.Node, p *Pool) {
	for _, f := range node.Functions {
		// Candidates: VFs, and functions without VFs (a PF with VFs
		// enabled is the VFs' parent, not a device of its own).
		if !f.IsVF && f.NumVFs > 0 {
			continue
		}
		matched := false
		for _, s := range p.Spec.Selectors {
			if matchSriov(node, f, s) {
				matched = true
				break
			}
		}
		if !matched {
			continue
		}
		if f.DefaultRoute {
			p.Problems = append(p.Problems, fmt.Sprintf("%s (%s) carries the node's default route; never handed out", f.BDF, f.DefaultRouteLabel()))
			continue
		}
		d := Device{ID: f.BDF, PCI: f.BDF, Netdev: f.Netdev(), RDMA: f.RDMAName(), LinkLayer: f.LinkLayer,
			NUMA: f.NUMA, PCIRoot: f.PCIRoot, Upstream: f.Upstream, CharDevs: charDevs(f)}
		if f.IsVF {
			d.PF, d.VFIndex, d.PFNetdev = f.PF, f.VFIndex, pfNetdev(node, f)
		}
		d.Health, d.Reason = health(node, f, p.Spec.NeedsRDMA())
		p.Devices = append(p.Devices, d)
	}
	sort.Slice(p.Devices, func(i, j int) bool { return p.Devices[i].ID < p.Devices[j].ID })
}

func charDevs(f *inventory.Function) []string {
	var out []string
	for _, r := range f.RDMA {
		out = append(out, r.CharDevs...)
	}
	return out
}

// health decides a function's health from what the host can see. A VF
// whose netdev (or RDMA device) moved into a pod is not visible in the host
// namespace; that is allocation, not failure, so only the PF link and the
// presence of the function's uverbs device count then.
func health(node *inventory.Node, f *inventory.Function, needRDMA bool) (string, string) {
	if f.IsVF {
		if pf := node.Function(f.PF); pf != nil && linkDown(pf) {
			return Unhealthy, fmt.Sprintf("PF %s link is %s", pf.Netdev(), pf.OperState)
		}
	}
	if linkDown(f) {
		return Unhealthy, fmt.Sprintf("netdev %s link is %s", f.Netdev(), f.OperState)
	}
	if needRDMA && !f.HasRDMA() {
		return Unhealthy, "RDMA device disappeared"
	}
	for _, r := range f.RDMA {
		for _, port := range r.Ports {
			if !PortActive(port.State) {
				return Unhealthy, PortProblem(r.Name, port)
			}
		}
	}
	return Healthy, ""
}

// PortActive reports whether an RDMA port state (sysfs ports/<n>/state,
// without its number) lets the port carry traffic: ACTIVE or ACTIVE_DEFER.
// DOWN, INIT (an InfiniBand port no subnet manager configured) and ARMED
// do not. An unread state ("") is not taken for a failure.
func PortActive(state string) bool {
	switch state {
	case "", "ACTIVE", "ACTIVE_DEFER":
		return true
	}
	return false
}

// PortProblem is the health reason of a port that is not active.
func PortProblem(rdma string, p inventory.Port) string {
	msg := fmt.Sprintf("RDMA port %s/%d is %s", rdma, p.Num, p.State)
	if p.LinkLayer == inventory.LinkInfiniBand && (p.State == "INIT" || p.State == "ARMED") {
		msg += " (no subnet manager has brought it to ACTIVE)"
	}
	return msg
}

// LinkDown reports a link failure: the netdev is administratively up but
// its operational state is down (no carrier, lower layer down). An idle VF
// that nobody brought up is admin-down; that is not a failure.
func LinkDown(f *inventory.Function) bool { return linkDown(f) }

func linkDown(f *inventory.Function) bool {
	if !f.AdminUp {
		return false
	}
	switch f.OperState {
	case "down", "lowerlayerdown", "notpresent":
		return true
	}
	return false
}

func matchShared(f *inventory.Function, s config.SharedSelector) bool {
	if !f.HasRDMA() {
		return false
	}
	if len(s.Vendors) > 0 && !contains(s.Vendors, f.Vendor) {
		return false
	}
	if len(s.DeviceIDs) > 0 && !contains(s.DeviceIDs, f.Device) {
		return false
	}
	if len(s.Drivers) > 0 && !contains(s.Drivers, f.Driver) {
		return false
	}
	if len(s.LinkTypes) > 0 && !contains(s.LinkTypes, linkTypeOf(f)) {
		return false
	}
	if len(s.IfNames) > 0 {
		ok := false
		for _, nd := range f.Netdevs {
			if contains(s.IfNames, nd) {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func buildShared(node *inventory.Node, p *Pool) {
	for _, f := range node.Functions {
		if !matchShared(f, p.Spec.Shared) {
			continue
		}
		if f.DefaultRoute {
			p.Problems = append(p.Problems, fmt.Sprintf("%s (%s) carries the node's default route; never handed out", f.BDF, f.DefaultRouteLabel()))
			continue
		}
		h := HCA{PCI: f.BDF, Netdev: f.Netdev(), RDMA: f.RDMAName(), LinkLayer: f.LinkLayer, NUMA: f.NUMA, CharDevs: charDevs(f)}
		h.Health, h.Reason = health(node, f, true)
		p.HCAs = append(p.HCAs, h)
	}
	if len(p.HCAs) == 0 {
		return
	}
	health, reason := sharedHealth(p.HCAs)
	numa := p.HCAs[0].NUMA
	var numas []int
	seen := map[int]bool{}
	for _, h := range p.HCAs {
		if h.NUMA >= 0 && !seen[h.NUMA] {
			seen[h.NUMA] = true
			numas = append(numas, h.NUMA)
		}
	}
	sort.Ints(numas)
	for i := 0; i < p.Spec.RdmaHcaMax; i++ {
		p.Devices = append(p.Devices, Device{ID: fmt.Sprintf("%s-%03d", slotPrefix(p.Spec), i), NUMA: numa, NUMAs: numas, Health: health, Reason: reason})
	}
}

func slotPrefix(s config.Pool) string {
	return strings.ReplaceAll(s.Name, "_", "-")
}

// EnvName is the upstream SR-IOV device plugin's variable for a resource:
// PCIDEVICE_<PREFIX>_<NAME> with every non-alphanumeric as '_', upper case.
func EnvName(resource string) string {
	var b strings.Builder
	b.WriteString("PCIDEVICE_")
	for _, r := range strings.ToUpper(resource) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// Summary is a one-line description of the pool for logs.
func (p *Pool) Summary() string {
	healthy := 0
	for _, d := range p.Devices {
		if d.Health == Healthy {
			healthy++
		}
	}
	s := fmt.Sprintf("%s (%s): %d devices, %d healthy", p.Resource, p.Kind, len(p.Devices), healthy)
	if len(p.HCAs) > 0 {
		names := make([]string, len(p.HCAs))
		for i, h := range p.HCAs {
			names[i] = h.RDMA
		}
		s += " over " + strings.Join(names, ",") + " x" + strconv.Itoa(p.Spec.RdmaHcaMax)
	}
	if !p.Advertised {
		s += " [not advertised]"
	}
	return s
}

// HealthChange is one device whose health Rehealth changed.
type HealthChange struct {
	Resource, Device, Health, Reason string
}

// Rehealth recomputes every device's health from node (after
// inventory.Node.RefreshHealth) and returns what changed.
func Rehealth(node *inventory.Node, pools []*Pool) []HealthChange {
	var changed []HealthChange
	for _, p := range pools {
		switch p.Spec.Kind {
		case config.Exclusive:
			for i := range p.Devices {
				d := &p.Devices[i]
				f := node.Function(d.PCI)
				if f == nil {
					continue
				}
				h, r := health(node, f, p.Spec.NeedsRDMA())
				if h != d.Health || r != d.Reason {
					d.Health, d.Reason = h, r
					changed = append(changed, HealthChange{p.Resource, d.ID, h, r})
				}
			}
		case config.Shared:
			for i := range p.HCAs {
				h := &p.HCAs[i]
				if f := node.Function(h.PCI); f != nil {
					hh, r := health(node, f, true)
					if hh != h.Health || r != h.Reason {
						// also when the slots' health stays (another HCA
						// was already down): the DRA device is the HCA
						changed = append(changed, HealthChange{p.Resource, "HCA " + h.PCI, hh, r})
					}
					h.Health, h.Reason = hh, r
				}
			}
			hs, reason := sharedHealth(p.HCAs)
			for i := range p.Devices {
				d := &p.Devices[i]
				if d.Health != hs || d.Reason != reason {
					d.Health, d.Reason = hs, reason
					if i == 0 { // one line for all slots
						changed = append(changed, HealthChange{p.Resource, fmt.Sprintf("all %d slots", len(p.Devices)), hs, reason})
					}
				}
			}
		}
	}
	return changed
}

// sharedHealth: a slot grants every HCA of the pool, so it is healthy only
// when all of them are.
func sharedHealth(hcas []HCA) (string, string) {
	for _, h := range hcas {
		if h.Health != Healthy {
			return Unhealthy, h.PCI + ": " + h.Reason
		}
	}
	return Healthy, ""
}
