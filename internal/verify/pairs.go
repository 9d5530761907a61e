package verify

// The pair layer: every ordered pair of a workload's pods over the training
// network (network-status addresses), probed from inside the pods by
// rdmanet-probe ephemeral containers (pairrun.go), judged here (pure).

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/rdmanet/rdmanet/internal/manifest"
	"github.com/rdmanet/rdmanet/internal/pairprobe"
)

// LayerPairs is the pair layer's name in reports.
const LayerPairs = "pairs"

// Pair cell statuses: ok, or the failing layer (in the order a cell names
// the first: the address plan, the path, its MTU, the placement), or
// unknown (the probe could not run or report).
const (
	PairOK          = "ok"
	PairSubnet      = "subnet"
	PairUnreachable = "unreachable"
	PairMTU         = "mtu"
	PairSameNode    = "same-node"
	PairUnknown     = "unknown"
)

// PairLayers lists the failing layers in precedence order.
var PairLayers = []string{PairSubnet, PairUnreachable, PairMTU, PairSameNode}

// HostnameKey is the topology key of "different nodes".
const HostnameKey = "kubernetes.io/hostname"

// Attachment is one secondary network of a pod, from network-status.
type Attachment struct {
	Network   string `json:"network"` // namespace/name of the NAD
	Interface string `json:"interface"`
	IP        string `json:"ip"`
	// StatusMTU is network-status' mtu (0 when the meta-CNI wrote none).
	StatusMTU int `json:"status_mtu,omitempty"`
}

// Member is one pod of the pair run.
type Member struct {
	Index       int          `json:"index"`
	Pod         string       `json:"pod"`
	Node        string       `json:"node"`
	Attachments []Attachment `json:"attachments"`
}

// Attachment returns the member's attachment to network.
func (m *Member) Attachment(network string) (Attachment, bool) {
	for _, a := range m.Attachments {
		if a.Network == network {
			return a, true
		}
	}
	return Attachment{}, false
}

// NetPlan is what a network's NAD promises: the MTU to prove end to end
// and the subnets its IPAM hands out.
type NetPlan struct {
	Network string `json:"network"`
	// MTU and where it comes from: "nad" (the config's mtu), "network-status"
	// (the meta-CNI's mtu), "interface" (neither: the pod's interface MTU,
	// as the probe reads it; MTU is then 0 here).
	MTU       int      `json:"mtu"`
	MTUSource string   `json:"mtu_source"`
	Subnets   []string `json:"subnets"`
	// Note says why the NAD could not be read (subnets then come from the
	// pods' interfaces).
	Note string `json:"note,omitempty"`
}

// Placement says whether pairs must be on different nodes.
type Placement struct {
	// Rule names what asks for it ("" when nothing does).
	Rule string `json:"rule,omitempty"`
}

// PairNet is one network's outcome for an ordered pair.
type PairNet struct {
	Network   string `json:"network"`
	Interface string `json:"interface"`
	Src       string `json:"src"`
	Dst       string `json:"dst"`
	Status    string `json:"status"`
	Reachable bool   `json:"reachable"`
	RTTMicros int64  `json:"rtt_us"`
	MTU       int    `json:"mtu"`
	WantDF    int    `json:"want_df_bytes"`
	MaxDF     int    `json:"max_df_bytes"`
	Evidence  string `json:"evidence"`
}

// Cell is the ordered pair From → To (the client in From, the responder in To).
type Cell struct {
	From      string    `json:"from"`
	To        string    `json:"to"`
	FromNode  string    `json:"from_node"`
	ToNode    string    `json:"to_node"`
	CrossNode bool      `json:"cross_node"`
	Status    string    `json:"status"`
	Failed    []string  `json:"failed_layers"`
	Networks  []PairNet `json:"networks"`
	Evidence  string    `json:"evidence"`
	Fix       string    `json:"fix,omitempty"`
}

// PairSummary counts the cells.
type PairSummary struct {
	Pods    int `json:"pods"`
	Nodes   int `json:"nodes"`
	Cells   int `json:"cells"`
	OK      int `json:"ok"`
	Problem int `json:"problem"`
	Unknown int `json:"unknown"`
	// CrossNode is the number of cells whose pods are on different nodes.
	CrossNode    int    `json:"cross_node"`
	MaxRTTMicros int64  `json:"max_rtt_us"`
	Result       string `json:"result"`
}

// PairReport is the pair layer's outcome.
type PairReport struct {
	Namespace  string    `json:"namespace"`
	Target     string    `json:"target"`
	ProbeImage string    `json:"probe_image"`
	Members    []Member  `json:"members"`
	Networks   []NetPlan `json:"networks"`
	Placement  Placement `json:"placement"`
	// Skipped are pods of the target not probed, with why.
	Skipped    []string    `json:"skipped"`
	Cells      []Cell      `json:"cells"`
	DurationMS int64       `json:"duration_ms"`
	Summary    PairSummary `json:"summary"`
}

// FirstProblem is the first cell with a problem (nil when none).
func (r *PairReport) FirstProblem() *Cell {
	for i := range r.Cells {
		if c := &r.Cells[i]; c.Status != PairOK && c.Status != PairUnknown {
			return c
		}
	}
	return nil
}

// FirstUnknown is the first unknown cell (nil when none).
func (r *PairReport) FirstUnknown() *Cell {
	for i := range r.Cells {
		if c := &r.Cells[i]; c.Status == PairUnknown {
			return c
		}
	}
	return nil
}

// PairMembers reads the pods' training attachments (network-status entries
// that are not the default network). Pods that ended (Succeeded, Failed) are
// skipped; a pod that is not Running, has no node, or has no training
// attachment with an address is an input error naming the pod and the fix.
func PairMembers(pods []corev1.Pod) (members []Member, skipped []string, err error) {
	for i := range pods {
		p := &pods[i]
		ref := p.Namespace + "/" + p.Name
		switch p.Status.Phase {
		case corev1.PodSucceeded, corev1.PodFailed:
			skipped = append(skipped, fmt.Sprintf("pod %s: %s (ended; only running pods are probed)", ref, p.Status.Phase))
			continue
		case corev1.PodRunning:
		default:
			return nil, nil, fmt.Errorf("pod %s is %s, not Running: the probe runs in running pods; fix: wait for the workload (kubectl wait --for=condition=Ready pod/%s -n %s) and run verify again", ref, orDash(string(p.Status.Phase)), p.Name, p.Namespace)
		}
		if p.Spec.HostNetwork {
			return nil, nil, fmt.Errorf("pod %s: spec.hostNetwork is true: host-mode pods use the node's NICs and have no network-status training address; the pair layer checks pods with a secondary network (exclusive, shared); fix: verify host-mode workloads with --pairs=false", ref)
		}
		raw, ok := p.Annotations[NetworkStatusAnnotation]
		if !ok {
			return nil, nil, fmt.Errorf("pod %s: no annotation %s: no meta-CNI reported a training network for it; fix: give the pod's template the k8s.v1.cni.cncf.io/networks annotation naming the training NAD, and check that rdmanet (or Multus) is the node's CNI", ref, NetworkStatusAnnotation)
		}
		var st []nadv1.NetworkStatus
		if err := json.Unmarshal([]byte(raw), &st); err != nil {
			return nil, nil, fmt.Errorf("pod %s: annotation %s: %w; fix: the meta-CNI wrote an unreadable value: report it", ref, NetworkStatusAnnotation, err)
		}
		m := Member{Pod: p.Name, Node: p.Spec.NodeName}
		for _, s := range st {
			if s.Default || len(s.IPs) == 0 {
				continue
			}
			ip := s.IPs[0]
			for _, x := range s.IPs { // prefer IPv4 (the RoCEv2 IPv4 GID's)
				if a, err := netip.ParseAddr(x); err == nil && a.Is4() {
					ip = x
					break
				}
			}
			iface := s.Interface
			if iface == "" {
				iface = "net1"
			}
			m.Attachments = append(m.Attachments, Attachment{Network: s.Name, Interface: iface, IP: ip, StatusMTU: s.Mtu})
		}
		if len(m.Attachments) == 0 {
			return nil, nil, fmt.Errorf("pod %s: annotation %s has no secondary network with an address (only the default network): the pod has no training network; fix: give the pod's template the k8s.v1.cni.cncf.io/networks annotation, and check the NAD's ipam section if the entry is there without ips", ref, NetworkStatusAnnotation)
		}
		if m.Node == "" {
			return nil, nil, fmt.Errorf("pod %s: spec.nodeName is empty though the pod runs; fix: report it", ref)
		}
		members = append(members, m)
	}
	sort.Slice(members, func(i, j int) bool { return naturalLess(members[i].Pod, members[j].Pod) })
	for i := range members {
		members[i].Index = i
	}
	return members, skipped, nil
}

// PlanFromNAD reads a NAD's CNI config: the MTU (any plugin's "mtu") and
// the IPAM subnets (whereabouts range / ipRanges, host-local subnet /
// ranges, static addresses). nad nil: not found / not readable (note why).
func PlanFromNAD(network string, nad *NAD, note string, members []Member) NetPlan {
	p := NetPlan{Network: network, Subnets: []string{}, Note: note}
	if nad != nil {
		var obj struct {
			Spec struct {
				Config string `json:"config"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(nad.Raw, &obj); err == nil && obj.Spec.Config != "" {
			if cfg, err := manifest.ParseCNIConfig(obj.Spec.Config); err == nil {
				for _, pl := range cfg.Plugins {
					if n, ok := manifest.Int(pl.Raw["mtu"]); ok && n > 0 && p.MTU == 0 {
						p.MTU, p.MTUSource = n, "nad"
					}
					p.Subnets = append(p.Subnets, ipamSubnets(pl.IPAM())...)
				}
			} else {
				p.Note = fmt.Sprintf("NAD %s: spec.config: %v", network, err)
			}
		}
	}
	if p.MTU == 0 {
		for _, m := range members {
			if a, ok := m.Attachment(network); ok && a.StatusMTU > 0 {
				p.MTU, p.MTUSource = a.StatusMTU, "network-status"
				break
			}
		}
	}
	if p.MTU == 0 {
		p.MTUSource = "interface"
	}
	return p
}

// ipamSubnets lists the prefixes an IPAM section hands out from.
func ipamSubnets(ipam map[string]any) []string {
	if ipam == nil {
		return nil
	}
	var out []string
	add := func(v any) {
		s, _ := v.(string)
		if pf, ok := rangePrefix(s); ok {
			out = append(out, pf.String())
		}
	}
	add(ipam["range"])
	add(ipam["subnet"])
	if rs, ok := ipam["ipRanges"].([]any); ok {
		for _, r := range rs {
			if m, ok := r.(map[string]any); ok {
				add(m["range"])
			}
		}
	}
	if rs, ok := ipam["ranges"].([]any); ok { // host-local: [[{subnet}]]
		for _, set := range rs {
			if l, ok := set.([]any); ok {
				for _, r := range l {
					if m, ok := r.(map[string]any); ok {
						add(m["subnet"])
					}
				}
			}
		}
	}
	if as, ok := ipam["addresses"].([]any); ok { // static
		for _, a := range as {
			if m, ok := a.(map[string]any); ok {
				add(m["address"])
			}
		}
	}
	return out
}

// rangePrefix reads "10.0.0.0/16" or whereabouts' "10.0.0.10-10.0.0.50/24".
func rangePrefix(s string) (netip.Prefix, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return netip.Prefix{}, false
	}
	if start, rest, ok := strings.Cut(s, "-"); ok {
		_, bits, ok := strings.Cut(rest, "/")
		if !ok {
			return netip.Prefix{}, false
		}
		s = start + "/" + bits
	}
	pf, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, false
	}
	return pf.Masked(), true
}

// PlacementRule says whether the pods a and b must be on different nodes:
// a required podAntiAffinity term over kubernetes.io/hostname of either pod
// whose selector matches the other, or a topology spread constraint over
// kubernetes.io/hostname with whenUnsatisfiable DoNotSchedule whose
// selector matches the other and which the workload's placement breaks
// when they share a node (a node with more than maxSkew pods more than the
// emptiest eligible node). spread maps a node to the workload's pods on it;
// eligible is the number of nodes the pods may use (0: those in spread).
func PlacementRule(a, b *corev1.Pod, spread map[string]int, eligible int) string {
	for _, x := range [][2]*corev1.Pod{{a, b}, {b, a}} {
		p, q := x[0], x[1]
		if aff := p.Spec.Affinity; aff != nil && aff.PodAntiAffinity != nil {
			for i, term := range aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				if term.TopologyKey != HostnameKey || !termSelects(term.LabelSelector, term.Namespaces, p, q) {
					continue
				}
				return fmt.Sprintf("pod %s: spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[%d] (topologyKey %s, labelSelector %s) selects pod %s", p.Name, i, HostnameKey, selString(term.LabelSelector), q.Name)
			}
		}
		for i, c := range p.Spec.TopologySpreadConstraints {
			if c.TopologyKey != HostnameKey || c.WhenUnsatisfiable != corev1.DoNotSchedule || !termSelects(c.LabelSelector, nil, p, q) {
				continue
			}
			if a.Spec.NodeName != b.Spec.NodeName {
				continue
			}
			lo := 0
			if eligible <= len(spread) {
				lo = -1
				for _, n := range spread {
					if lo < 0 || n < lo {
						lo = n
					}
				}
			}
			if n := spread[a.Spec.NodeName]; n-lo > int(c.MaxSkew) {
				return fmt.Sprintf("pod %s: spec.topologySpreadConstraints[%d] (topologyKey %s, maxSkew %d, DoNotSchedule) selects pod %s, and node %s holds %d of the pods against %d on the emptiest eligible node", p.Name, i, HostnameKey, c.MaxSkew, q.Name, a.Spec.NodeName, n, lo)
			}
		}
	}
	return ""
}

func termSelects(sel *metav1.LabelSelector, namespaces []string, p, q *corev1.Pod) bool {
	if sel == nil {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false
	}
	if len(namespaces) == 0 {
		namespaces = []string{p.Namespace}
	}
	in := false
	for _, n := range namespaces {
		in = in || n == q.Namespace
	}
	return in && s.Matches(labels.Set(q.Labels))
}

func selString(sel *metav1.LabelSelector) string {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return "?"
	}
	return s.String()
}

// PlanTargets are the probe client's targets in member from: every other
// member on every network both have.
func PlanTargets(members []Member, from int, plans map[string]NetPlan) []pairprobe.Target {
	var out []pairprobe.Target
	f := members[from]
	for j, to := range members {
		if j == from {
			continue
		}
		for _, a := range f.Attachments {
			b, ok := to.Attachment(a.Network)
			if !ok {
				continue
			}
			out = append(out, pairprobe.Target{Peer: to.Pod, Network: a.Network, Interface: a.Interface, Src: a.IP, Dst: b.IP, MTU: plans[a.Network].MTU})
		}
	}
	return out
}

// Listeners are the addresses member m's responder answers on, and how many
// distinct peers will probe it (and say goodbye).
func Listeners(members []Member, m int) (addrs []string, peers int) {
	for _, a := range members[m].Attachments {
		addrs = append(addrs, a.IP)
	}
	for j, o := range members {
		if j == m {
			continue
		}
		for _, a := range o.Attachments {
			if _, ok := members[m].Attachment(a.Network); ok {
				peers++
				break
			}
		}
	}
	return addrs, peers
}

// ProbeOutcome is what one member's probes produced.
type ProbeOutcome struct {
	// Results of the member's client, by peer then network.
	Results map[string]map[string]pairprobe.Result
	// Err says why the member's client gave no results (unknown cells).
	Err string
	// ResponderErr says why the member's responder did not answer
	// (cells towards the member are unknown).
	ResponderErr string
}

// AssemblePairs judges every ordered pair from the members, the plans, the
// placement rules and the probes' outcomes (by member pod name). pods maps a
// member's name to its pod (for the placement rules).
func AssemblePairs(members []Member, plans map[string]NetPlan, pods map[string]*corev1.Pod, spread map[string]int, eligible int, out map[string]ProbeOutcome) ([]Cell, Placement) {
	var place Placement
	var cells []Cell
	for _, f := range members {
		for _, t := range members {
			if f.Pod == t.Pod {
				continue
			}
			c := Cell{From: f.Pod, To: t.Pod, FromNode: f.Node, ToNode: t.Node, CrossNode: f.Node != t.Node, Failed: []string{}, Networks: []PairNet{}}
			failed := map[string]string{} // layer → evidence
			unknown := ""
			common := 0
			for _, a := range f.Attachments {
				b, ok := t.Attachment(a.Network)
				if !ok {
					continue
				}
				common++
				pn := PairNet{Network: a.Network, Interface: a.Interface, Src: a.IP, Dst: b.IP, MTU: plans[a.Network].MTU}
				o := out[f.Pod]
				r, have := o.Results[t.Pod][a.Network]
				if have {
					pn.Reachable, pn.RTTMicros, pn.WantDF, pn.MaxDF = r.Reachable, r.RTTMicros, r.WantDF, r.MaxDF
					if pn.MTU == 0 {
						pn.MTU = r.LocalMTU
					}
				}
				var ev []string
				layer := ""
				if why := subnetProblem(plans[a.Network], a, b, r, have); why != "" {
					layer, ev = PairSubnet, append(ev, why)
					failed[PairSubnet] = a.Network + ": " + why
				}
				switch {
				case !have && o.Err != "":
					unknown = fmt.Sprintf("pod %s: probe client: %s", f.Pod, o.Err)
				case !have && out[t.Pod].ResponderErr != "":
					unknown = fmt.Sprintf("pod %s: probe responder: %s", t.Pod, out[t.Pod].ResponderErr)
				case !have:
					unknown = fmt.Sprintf("pod %s: the probe client reported nothing for %s on %s", f.Pod, t.Pod, a.Network)
				case !r.Reachable:
					if layer == "" {
						layer = PairUnreachable
					}
					ev = append(ev, r.Error)
					failed[PairUnreachable] = a.Network + ": " + r.Error
				case r.MaxDF < r.WantDF:
					if layer == "" {
						layer = PairMTU
					}
					ev = append(ev, r.Error)
					failed[PairMTU] = a.Network + ": " + r.Error
				default:
					ev = append(ev, fmt.Sprintf("%s → %s reachable, RTT %dµs, DF %d bytes (MTU %d) echoed", a.IP, b.IP, r.RTTMicros, r.MaxDF, pn.MTU))
				}
				if !have && layer == "" {
					pn.Status, pn.Evidence = PairUnknown, unknown
				} else {
					pn.Status = PairOK
					if layer != "" {
						pn.Status = layer
					}
					pn.Evidence = strings.Join(ev, "; ")
				}
				c.Networks = append(c.Networks, pn)
			}
			if common == 0 {
				failed[PairSubnet] = fmt.Sprintf("no training network in common: %s has %s, %s has %s", f.Pod, netNames(f), t.Pod, netNames(t))
			}
			if !c.CrossNode {
				if rule := PlacementRule(pods[f.Pod], pods[t.Pod], spread, eligible); rule != "" {
					failed[PairSameNode] = fmt.Sprintf("both on node %s, but %s", f.Node, rule)
					place.Rule = rule
				}
			} else if place.Rule == "" {
				if rule := PlacementRule(pods[f.Pod], pods[t.Pod], map[string]int{}, 0); rule != "" {
					place.Rule = rule
				}
			}
			for _, l := range PairLayers {
				if ev, ok := failed[l]; ok {
					c.Failed = append(c.Failed, l)
					if c.Status == "" {
						c.Status, c.Evidence, c.Fix = l, ev, pairFix(l, f, t)
					}
				}
			}
			switch {
			case c.Status != "":
			case unknown != "":
				c.Status, c.Evidence, c.Fix = PairUnknown, unknown, "see the probe's error; kubectl rdma verify --help (RBAC, probe image)"
			default:
				c.Status = PairOK
				var ev []string
				for _, n := range c.Networks {
					ev = append(ev, n.Evidence)
				}
				if !c.CrossNode {
					ev = append(ev, "same node "+f.Node+": this pair's traffic did not cross nodes")
				}
				c.Evidence = strings.Join(ev, "; ")
			}
			cells = append(cells, c)
		}
	}
	return cells, place
}

func netNames(m Member) string {
	var n []string
	for _, a := range m.Attachments {
		n = append(n, a.Network)
	}
	return strings.Join(n, ",")
}

// subnetProblem checks that a and b are in one subnet of the plan (the
// NAD's IPAM), else in the client interface's prefix as the probe read it.
func subnetProblem(p NetPlan, a, b Attachment, r pairprobe.Result, have bool) string {
	ia, errA := netip.ParseAddr(a.IP)
	ib, errB := netip.ParseAddr(b.IP)
	if errA != nil || errB != nil {
		return fmt.Sprintf("network-status addresses %q, %q are not IP addresses", a.IP, b.IP)
	}
	if len(p.Subnets) > 0 {
		var inA, inB []string
		for _, s := range p.Subnets {
			pf, _ := netip.ParsePrefix(s)
			if pf.Contains(ia) {
				inA = append(inA, s)
			}
			if pf.Contains(ib) {
				inB = append(inB, s)
			}
		}
		switch {
		case len(inA) == 0:
			return fmt.Sprintf("%s (%s) is outside NAD %s's IPAM subnets %s", a.IP, a.Interface, p.Network, strings.Join(p.Subnets, ","))
		case len(inB) == 0:
			return fmt.Sprintf("peer address %s is outside NAD %s's IPAM subnets %s", b.IP, p.Network, strings.Join(p.Subnets, ","))
		}
		for _, x := range inA {
			for _, y := range inB {
				if x == y {
					return ""
				}
			}
		}
		return fmt.Sprintf("%s is in %s but %s in %s: two subnets of NAD %s", a.IP, strings.Join(inA, ","), b.IP, strings.Join(inB, ","), p.Network)
	}
	if have && r.LocalCIDR != "" {
		if pf, err := netip.ParsePrefix(r.LocalCIDR); err == nil && !pf.Masked().Contains(ib) {
			return fmt.Sprintf("peer address %s is outside %s's %s (%s): no connected route to it", b.IP, a.Interface, r.LocalCIDR, "the NAD's IPAM subnet is unknown")
		}
	}
	return ""
}

func pairFix(layer string, f, t Member) string {
	switch layer {
	case PairSubnet:
		return "attach both pods to one NAD and let its IPAM (one range) address them; a stale network-status or an address outside the range means the attachment was not made by this NAD: delete the pod to re-attach"
	case PairUnreachable:
		return fmt.Sprintf("the training path between node %s and node %s is broken: check the PF links and the switch ports (VLAN of the NAD, trunked on both ports), the VFs' spoofchk/trust and VLAN on both nodes (kubectl rdma doctor on each node); a port unreachable means the probe responder did not start in %s", f.Node, t.Node, t.Pod)
	case PairMTU:
		return "raise the MTU on every hop to the NAD's (PFs on both nodes: ip link set <pf> mtu <mtu>; the switch ports), or lower the NAD's mtu to the largest size that crossed (max_df_bytes + 28 for IPv4)"
	case PairSameNode:
		return fmt.Sprintf("pods %s and %s share node %s though the workload asks for different nodes (pods bound by spec.nodeName, or the rule added after scheduling): delete the pods so the scheduler places them again; a single-node pair never exercises the cross-node path", f.Pod, t.Pod, f.Node)
	}
	return ""
}

// Summarise fills the report's summary.
func (r *PairReport) Summarise() {
	s := PairSummary{Pods: len(r.Members), Cells: len(r.Cells)}
	nodes := map[string]bool{}
	for _, m := range r.Members {
		nodes[m.Node] = true
	}
	s.Nodes = len(nodes)
	for _, c := range r.Cells {
		switch c.Status {
		case PairOK:
			s.OK++
		case PairUnknown:
			s.Unknown++
		default:
			s.Problem++
		}
		if c.CrossNode {
			s.CrossNode++
		}
		for _, n := range c.Networks {
			s.MaxRTTMicros = max(s.MaxRTTMicros, n.RTTMicros)
		}
	}
	switch {
	case s.Problem > 0:
		s.Result = string(Problem)
	case s.Unknown > 0:
		s.Result = string(Unknown)
	default:
		s.Result = string(OK)
	}
	r.Summary = s
}

// naturalLess orders names with numbers by value: trainer-2 before
// trainer-10 (a Job's or StatefulSet's index order).
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func digits(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}
