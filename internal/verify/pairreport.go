package verify

import (
	"fmt"
	"strings"

	"github.com/rdmanet/rdmanet/internal/textout"
)

// pairAbbrev is a cell's word in the text matrix.
var pairAbbrev = map[string]string{PairOK: "ok", PairUnreachable: "unr", PairMTU: "mtu", PairSubnet: "sub", PairSameNode: "node", PairUnknown: "?"}

// SetPairs attaches the pair layer and folds its result into the summary's
// (a problem anywhere wins over an unknown).
func (r *Result) SetPairs(p *PairReport) {
	r.Pairs = p
	if p == nil {
		return
	}
	rank := map[string]int{string(OK): 0, string(Unknown): 1, string(Problem): 2}
	if rank[p.Summary.Result] > rank[r.Summary.Result] {
		r.Summary.Result = p.Summary.Result
	}
}

// writePairs writes the pair matrix for people: the members (index, pod,
// node, addresses), the networks' plans, the placement rule, the matrix
// (rows from, columns to), every cell that is not ok with evidence and fix,
// and a summary line.
func writePairs(p *textout.Printer, r *PairReport) {
	s := r.Summary
	p.Printf("%s %s in %s  %d pods on %d nodes  probe image %s\n", p.C(textout.Bold, "kubectl rdma verify pairs"), r.Target, r.Namespace, s.Pods, s.Nodes, r.ProbeImage)
	for _, n := range r.Networks {
		mtu := fmt.Sprintf("MTU %d (%s)", n.MTU, n.MTUSource)
		if n.MTU == 0 {
			mtu = "MTU of the pods' interfaces (the NAD sets none)"
		}
		sub := strings.Join(n.Subnets, ",")
		if sub == "" {
			sub = "unknown (from the pods' interfaces)"
		}
		p.Printf("  network %s  %s  subnets %s\n", n.Network, mtu, sub)
		if n.Note != "" {
			p.Printf("  %s\n", p.C(textout.Dim, n.Note))
		}
	}
	if r.Placement.Rule != "" {
		p.Printf("  placement: different nodes required: %s\n", r.Placement.Rule)
	} else {
		p.Printf("  placement: no anti-affinity or DoNotSchedule spread over %s asks for different nodes\n", HostnameKey)
	}
	for _, sk := range r.Skipped {
		p.Printf("  %s\n", p.C(textout.Dim, "skipped "+sk))
	}
	podw, nodew := 3, 4
	for _, m := range r.Members {
		podw, nodew = max(podw, len(m.Pod)), max(nodew, len(m.Node))
	}
	p.Printf("  %-3s %-*s  %-*s  %s\n", "#", podw, "pod", nodew, "node", "training addresses")
	for _, m := range r.Members {
		var as []string
		for _, a := range m.Attachments {
			as = append(as, a.Interface+" "+a.IP)
		}
		p.Printf("  %-3d %-*s  %-*s  %s\n", m.Index, podw, m.Pod, nodew, m.Node, strings.Join(as, ", "))
	}
	cell := map[[2]string]*Cell{}
	for i := range r.Cells {
		cell[[2]string{r.Cells[i].From, r.Cells[i].To}] = &r.Cells[i]
	}
	p.Printf("\n  %-7s", "from\\to")
	for _, m := range r.Members {
		p.Printf(" %4d", m.Index)
	}
	p.Printf("\n")
	for _, f := range r.Members {
		p.Printf("  %-7d", f.Index)
		for _, t := range r.Members {
			w := "-"
			if c := cell[[2]string{f.Pod, t.Pod}]; c != nil {
				w = pairAbbrev[c.Status]
			}
			pad := strings.Repeat(" ", max(0, 4-len(w)))
			switch w {
			case "ok":
				w = p.C(textout.Green, w)
			case "?":
				w = p.C(textout.Yellow, w)
			case "-":
			default:
				w = p.C(textout.Red, w)
			}
			p.Printf(" %s%s", pad, w)
		}
		p.Printf("\n")
	}
	p.Printf("  %s\n", p.C(textout.Dim, "ok; unr unreachable; mtu DF size of the MTU lost; sub subnet plan; node same node against anti-affinity; ? not probed"))
	first := true
	for _, c := range r.Cells {
		if c.Status == PairOK {
			continue
		}
		if first {
			p.Printf("\n")
			first = false
		}
		st := strings.ToUpper(c.Status)
		if c.Status == PairUnknown {
			st = p.C(textout.Yellow, st)
		} else {
			st = p.C(textout.Red, st)
		}
		p.Printf("  %s → %s  (%s → %s)  %s  %s\n", c.From, c.To, c.FromNode, c.ToNode, st, c.Evidence)
		if c.Fix != "" {
			p.Printf("      %s %s\n", p.C(textout.Dim, "fix:"), c.Fix)
		}
	}
	p.Printf("%s pairs: %d cells, %d ok, %d problem, %d unknown; %d cross-node; max RTT %dµs; %.1fs\n", resultWord(p, s.Result), s.Cells, s.OK, s.Problem, s.Unknown, s.CrossNode, s.MaxRTTMicros, float64(r.DurationMS)/1000)
}
