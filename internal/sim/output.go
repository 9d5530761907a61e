package sim

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/rdmanet/rdmanet/internal/textout"
)

// WriteJSON writes the report as exactly one JSON object.
func WriteJSON(w io.Writer, r *Report) error {
	return textout.WriteJSON(w, r)
}

func ifaceCell(p PodReport, name string) string {
	for _, i := range p.Interfaces {
		if i.Name == name {
			s := strings.Join(i.IPs, ",")
			if s == "" {
				s = "(no address)"
			}
			return s
		}
	}
	return "-"
}

func envCell(vs []EnvVar) string {
	var parts []string
	for _, v := range vs {
		if v.Value != "" {
			parts = append(parts, v.Name+"="+v.Value)
		}
	}
	return strings.Join(parts, " ")
}

// statusCell is a compact form of the network-status annotation:
// <network>@<interface>[*=default][ pci]...
func statusCell(p PodReport) string {
	if len(p.NetworkStatus) == 0 {
		if p.Mode == ModeHost {
			return "(none: hostNetwork)"
		}
		return "-"
	}
	var st []struct {
		Name       string   `json:"name"`
		Interface  string   `json:"interface"`
		IPs        []string `json:"ips"`
		Default    bool     `json:"default"`
		DeviceInfo *struct {
			Pci *struct {
				PciAddress string `json:"pci-address"`
				RdmaDevice string `json:"rdma-device"`
			} `json:"pci"`
		} `json:"device-info"`
	}
	if err := json.Unmarshal(p.NetworkStatus, &st); err != nil {
		return "(unreadable)"
	}
	var parts []string
	for _, s := range st {
		c := s.Interface + "=" + s.Name
		if s.Default {
			c += "*"
		}
		if s.DeviceInfo != nil && s.DeviceInfo.Pci != nil {
			c += "[" + s.DeviceInfo.Pci.PciAddress
			if s.DeviceInfo.Pci.RdmaDevice != "" {
				c += " " + s.DeviceInfo.Pci.RdmaDevice
			}
			c += "]"
		}
		parts = append(parts, c)
	}
	return strings.Join(parts, " ")
}

// WriteTable writes the human form: the nodes, one row per pod, the
// network-status of the first pod per mode, timings and the verdict.
func WriteTable(w io.Writer, r *Report) error {
	b := &strings.Builder{}
	ibNodes := ""
	for _, n := range r.Summary.Nodes {
		if slices.ContainsFunc(n.Modes, func(m string) bool { return slices.Contains(IBModes, m) }) {
			ibNodes = "; the InfiniBand variants likewise on IB nodes"
		}
	}
	fmt.Fprintf(b, "Simulated nodes (one RDMA subsystem has one netns mode, so exclusive and shared pods run on different nodes with the same hardware%s):\n", ibNodes)
	for _, n := range r.Summary.Nodes {
		fmt.Fprintf(b, "  %-16s RDMA netns mode %-9s modes %-12s host netns %s\n", n.Name, n.RDMANetnsMode, strings.Join(n.Modes, ","), n.Host)
		for _, p := range n.Pools {
			fmt.Fprintf(b, "  %-16s   pool %s\n", "", p)
		}
	}
	fmt.Fprintf(b, "Note: %s.\n\n", r.Summary.Simulated)
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tMODE\tNODE\teth0\tnet1\tDEFAULT ROUTE\tDEVICE\tRDMA DEVICE\tNCCL ENV THAT FITS\tNETWORK-STATUS (iface=network, *=default)\tALLOC\tATTACH")
	for _, p := range r.Pods {
		eth0, net1, def := ifaceCell(p, "eth0"), ifaceCell(p, "net1"), p.DefaultRoute
		if p.Mode == ModeHost {
			eth0, net1, def = "(host netns)", "(host netns)", "node's"
			if len(p.Interfaces) > 0 {
				net1 = p.Interfaces[0].Name + " " + strings.Join(p.Interfaces[0].IPs, ",")
			}
		}
		if def == "" {
			def = "none"
		}
		attach := fmt.Sprintf("%dms", p.AttachMS)
		if p.Mode == ModeHost {
			attach = "no CNI"
		}
		if p.Error != "" {
			attach = "FAILED"
		}
		fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%dms\t%s\n", p.Namespace, p.Name, p.Mode, p.Node, eth0, net1, def,
			p.Device, p.RDMA, envCell(p.NCCL), statusCell(p), p.AllocMS, attach)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeIB(b, r)
	// the same note for many pods is printed once, naming them
	var order []string
	who := map[string][]string{}
	for _, p := range r.Pods {
		texts := p.Notes
		if p.Error != "" {
			texts = append(slices.Clone(texts), "ERROR: "+p.Error)
		}
		for _, n := range texts {
			if _, ok := who[n]; !ok {
				order = append(order, n)
			}
			who[n] = append(who[n], p.Namespace+"/"+p.Name)
		}
	}
	var notes []string
	for _, n := range order {
		notes = append(notes, fmt.Sprintf("  %s: %s", strings.Join(who[n], ", "), n))
	}
	if len(notes) > 0 {
		fmt.Fprintln(b, "\nNotes:")
		fmt.Fprintln(b, strings.Join(notes, "\n"))
	}
	shown := map[string]bool{}
	for _, p := range r.Pods {
		if shown[p.Mode] || len(p.NetworkStatus) == 0 {
			continue
		}
		shown[p.Mode] = true
		fmt.Fprintf(b, "\nnetwork-status of %s/%s (%s):\n  %s\n", p.Namespace, p.Name, p.Mode, p.NetworkStatus)
		var routes []string
		for _, i := range p.Interfaces {
			routes = append(routes, i.Name+": "+strings.Join(i.Routes, ", "))
		}
		fmt.Fprintf(b, "routes in its netns: %s\n", strings.Join(routes, "; "))
	}
	fmt.Fprintln(b, "\nNCCL: why")
	shown = map[string]bool{}
	for _, p := range r.Pods {
		if shown[p.Mode] {
			continue
		}
		shown[p.Mode] = true
		for _, e := range p.NCCL {
			v := e.Name + "=" + e.Value
			if e.Value == "" {
				v = e.Name
			}
			fmt.Fprintf(b, "  %-12s %-32s %s\n", p.Mode, v, e.Why)
		}
	}
	fmt.Fprintln(b, "\nTimings:")
	modes := make([]string, 0, len(r.Summary.Modes))
	for m := range r.Summary.Modes {
		modes = append(modes, m)
	}
	sort.Slice(modes, func(i, j int) bool { return modeOrder(modes[i]) < modeOrder(modes[j]) })
	for _, m := range modes {
		s := r.Summary.Modes[m]
		if m == ModeHost {
			fmt.Fprintf(b, "  %-12s %d/%d pods ready (hostNetwork: device allocation only, no CNI)\n", m, s.Attached, s.Pods)
			continue
		}
		fmt.Fprintf(b, "  %-12s %d/%d pods attached, CNI ADD p50 %dms, max %dms\n", m, s.Attached, s.Pods, s.AttachP50MS, s.AttachMaxMS)
	}
	for i, c := range r.Summary.Cycles {
		det := fmt.Sprintf("detach (all in parallel) %dms", c.DetachWallMS)
		if r.Summary.Kept {
			det = "kept attached"
		}
		fmt.Fprintf(b, "  round %d: attach (all in parallel) %dms, %s\n", i+1, c.AttachWallMS, det)
	}
	if r.Summary.TotalMS > 0 {
		fmt.Fprintf(b, "  total %dms (node setup included)\n", r.Summary.TotalMS)
	}
	if r.Summary.Kept {
		fmt.Fprintln(b, "\nKept up. Look around, then clean up:")
		for _, c := range r.Summary.Commands {
			fmt.Fprintf(b, "  %s\n", c)
		}
	} else {
		fmt.Fprintf(b, "\nHost check after detach (%s):\n", r.Summary.HostChecked)
		for i, c := range r.Summary.Cycles {
			fmt.Fprintf(b, "  round %d: %s\n", i+1, c.Cleanup)
		}
		if r.Cleanup == "clean" {
			fmt.Fprintln(b, "Verdict: CLEAN: every simulated host is exactly as before (links, names, MACs, addresses, state files, VF settings, RDMA placement).")
		} else {
			fmt.Fprintf(b, "Verdict: LEAKED: %s\n", r.Cleanup)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func modeOrder(m string) int {
	for i, x := range AllModes {
		if x == m {
			return i
		}
	}
	return len(AllModes)
}

// writeIB writes the InfiniBand pods: each exclusive pod's GUID and PKey
// (and what DEL left), each IPoIB pod's child, the GUIDs' uniqueness, and
// the operations recorded for the first pod of each IB mode.
func writeIB(b *strings.Builder, r *Report) {
	var ib []PodReport
	for _, p := range r.Pods {
		if p.InfiniBand != nil {
			ib = append(ib, p)
		}
	}
	if len(ib) == 0 {
		return
	}
	fmt.Fprintf(b, "\nInfiniBand (the ib-sriov-cni and ipoib-cni NADs unchanged; ib-sriov GUIDs from the node's GUID pool %s-%s):\n", GUIDPoolStart, GUIDPoolEnd)
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  POD\tPLUGIN\tnet1\tVF / PARENT\tGUID\tPKEY\tAFTER DEL")
	guids := map[string]int{}
	exclusive, released := 0, 0
	for _, p := range ib {
		x := p.InfiniBand
		where, guid, pkey, after := "", x.GUID, x.PKey, ""
		switch x.Plugin {
		case "ipoib":
			where = fmt.Sprintf("IPoIB child of %s (%s mode)", x.Parent, x.Mode)
			guid = "port " + x.PortGUID + " (shared)"
			pkey += " (the port's)"
			after = "-"
		default:
			exclusive++
			guids[x.GUID]++
			where = fmt.Sprintf("VF %s, %s", x.VF, strings.TrimSuffix(p.RDMA, " (recorded)"))
			if x.GUIDSource != "" {
				guid += " (pool)"
			}
			after = "-"
			if x.GUIDAfterDel != "" || x.PoolReleased != nil {
				after = "VF GUID " + cmp.Or(x.GUIDAfterDel, "(none)")
				if x.PoolReleased != nil && *x.PoolReleased {
					after += ", free in the pool"
					released++
				} else if x.PoolReleased != nil {
					after += ", STILL ALLOCATED in the pool"
				}
			}
		}
		fmt.Fprintf(tw, "  %s/%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Namespace, p.Name, x.Plugin, ifaceCell(p, "net1"), where, guid, pkey, after)
	}
	_ = tw.Flush()
	if exclusive > 0 {
		verdict := fmt.Sprintf("  GUIDs: %d ib-sriov pods, %d distinct", exclusive, len(guids))
		if len(guids) == exclusive {
			verdict += " (unique)"
		} else {
			verdict += " (DUPLICATES)"
		}
		switch {
		case r.Summary.Kept:
			verdict += "; kept attached"
		case released == exclusive:
			verdict += "; after DEL every VF's GUID is reset (a fresh VF's zero GUID comes back as all ones, as with ib-sriov-cni) and every GUID is free in the pool again"
		default:
			verdict += fmt.Sprintf("; after DEL %d of %d GUIDs are free in the pool", released, exclusive)
		}
		fmt.Fprintln(b, verdict)
	}
	shown := map[string]bool{}
	for _, p := range ib {
		if shown[p.Mode] || len(p.InfiniBand.Recorded) == 0 {
			continue
		}
		shown[p.Mode] = true
		fmt.Fprintf(b, "  recorded for %s/%s (not done by a kernel here): %s\n", p.Namespace, p.Name, strings.Join(p.InfiniBand.Recorded, "; "))
	}
}
