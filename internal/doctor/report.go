package doctor

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/rdmanet/rdmanet/internal/inventory"

	"github.com/rdmanet/rdmanet/internal/textout"
)

// Report is the outcome of Run:
// {"checks":[{"id","section","status","message","fix"}],"summary":{...},"node":{...}}.
type Report struct {
	Checks  []Check  `json:"checks"`
	Summary Summary  `json:"summary"`
	Node    NodeView `json:"node"`
}

// Summary counts the checks; Result is the worst status.
type Summary struct {
	Pass   int    `json:"pass"`
	Warn   int    `json:"warn"`
	Fail   int    `json:"fail"`
	Result string `json:"result"`
}

// Failed reports whether any check failed (exit status 1).
func (r *Report) Failed() bool { return r.Summary.Fail > 0 }

// NodeView is what the node (or pod) has, as the checks saw it.
type NodeView struct {
	SysfsRoot         string            `json:"sysfs_root"`
	RDMANetnsMode     string            `json:"rdma_netns_mode"`
	NetnsModeSource   string            `json:"rdma_netns_mode_source"`
	DefaultRouteLinks []string          `json:"default_route_links"`
	Netdevs           map[string]string `json:"netdevs"`
	Memlock           Memlock           `json:"memlock"`
	CapIPCLock        *bool             `json:"cap_ipc_lock"`
	EnvSource         string            `json:"env_source"`
	NCCLEnv           map[string]string `json:"nccl_env"`
	Ibdev2netdev      []IbdevLine       `json:"ibdev2netdev"`
	GIDs              []GIDLine         `json:"gids"`
	SRIOV             []PFLine          `json:"sriov"`
	DevNodes          []string          `json:"dev_infiniband"`
}

// IbdevLine is one line of ibdev2netdev (plus state and link layer).
type IbdevLine struct {
	Device      string `json:"device"`
	Port        int    `json:"port"`
	Netdev      string `json:"netdev"`
	NetdevState string `json:"netdev_state"` // Up / Down, as ibdev2netdev prints
	PortState   string `json:"port_state"`
	LinkLayer   string `json:"link_layer"`
	PCI         string `json:"pci"`
	VF          bool   `json:"vf"`
	// RecommendedGIDIndex is the RoCEv2 IPv4 GID index (RoCE ports with an IPv4 address).
	RecommendedGIDIndex *int `json:"recommended_gid_index"`
}

// GIDLine is one line of show_gids.
type GIDLine struct {
	Device string `json:"device"`
	Port   int    `json:"port"`
	Index  int    `json:"index"`
	GID    string `json:"gid"`
	IPv4   string `json:"ipv4"`
	Type   string `json:"type"`
	Netdev string `json:"netdev"`
}

// PFLine is one SR-IOV PF.
type PFLine struct {
	PCI        string `json:"pci"`
	Netdev     string `json:"netdev"`
	Device     string `json:"rdma_device"`
	TotalVFs   int    `json:"total_vfs"`
	NumVFs     int    `json:"num_vfs"`
	PresentVFs int    `json:"present_vfs"`
}

func nodeView(in *Input) NodeView {
	v := NodeView{
		SysfsRoot:         in.SysfsRoot,
		DefaultRouteLinks: nonNil(in.DefaultRouteLinks),
		Netdevs:           in.Netdevs,
		Memlock:           in.Memlock,
		EnvSource:         in.EnvSource,
		NCCLEnv:           in.Env,
		Ibdev2netdev:      []IbdevLine{},
		GIDs:              []GIDLine{},
		SRIOV:             []PFLine{},
		DevNodes:          []string{},
	}
	v.RDMANetnsMode, v.NetnsModeSource = in.EffectiveNetnsMode()
	if v.Netdevs == nil {
		v.Netdevs = map[string]string{}
	}
	if v.NCCLEnv == nil {
		v.NCCLEnv = map[string]string{}
	}
	if in.Caps.Known {
		b := in.Caps.IPCLock()
		v.CapIPCLock = &b
	}
	for k, ok := range in.DevNodes {
		if ok {
			v.DevNodes = append(v.DevNodes, k)
		}
	}
	sort.Slice(v.DevNodes, func(i, j int) bool { return natLess(v.DevNodes[i], v.DevNodes[j]) })
	if in.Node == nil {
		return v
	}
	type row struct {
		f *inventory.Function
		d inventory.RDMADevice
	}
	var rows []row
	for _, f := range in.Node.Functions {
		for _, d := range f.RDMA {
			rows = append(rows, row{f, d})
		}
		if !f.IsVF && f.TotalVFs > 0 {
			v.SRIOV = append(v.SRIOV, PFLine{PCI: f.BDF, Netdev: f.Netdev(), Device: f.RDMAName(), TotalVFs: f.TotalVFs, NumVFs: f.NumVFs, PresentVFs: len(f.VFs)})
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return natLess(rows[i].d.Name, rows[j].d.Name) })
	for _, r := range rows {
		st := "Down"
		if r.f.AdminUp && r.f.OperState == "up" {
			st = "Up"
		}
		if r.f.Netdev() == "" {
			st = ""
		}
		for _, p := range r.d.Ports {
			l := IbdevLine{Device: r.d.Name, Port: p.Num, Netdev: r.f.Netdev(), NetdevState: st, PortState: p.State, LinkLayer: p.LinkLayer, PCI: r.f.BDF, VF: r.f.IsVF}
			if i, ok := p.RecommendedGIDIndex(); ok {
				l.RecommendedGIDIndex = &i
			}
			v.Ibdev2netdev = append(v.Ibdev2netdev, l)
			for _, g := range p.GIDs {
				v.GIDs = append(v.GIDs, GIDLine{Device: r.d.Name, Port: p.Num, Index: g.Index, GID: g.GID, IPv4: g.IPv4, Type: g.Type, Netdev: g.Netdev})
			}
		}
	}
	return v
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// WriteJSON writes the machine format.
func (r *Report) WriteJSON(w io.Writer) error {
	return textout.WriteJSON(w, r)
}

// TextOptions control the human format.
type TextOptions struct {
	Color bool // ANSI colours (only on a terminal)
	// VFs includes SR-IOV VFs in the ibdev2netdev and show_gids listings
	// (they are summarised otherwise).
	VFs bool
}

type printer struct {
	*textout.Printer
}

// WriteText writes the report for people: the ibdev2netdev and show_gids
// listings, then the checks grouped by section (PASS/WARN/FAIL with the fix),
// then a summary line.
func (r *Report) WriteText(w io.Writer, opt TextOptions) error {
	p := &printer{Printer: &textout.Printer{W: w, Color: opt.Color}}
	n := r.Node
	mode := n.RDMANetnsMode
	if n.NetnsModeSource != "" && n.NetnsModeSource != "none" {
		mode += " (" + n.NetnsModeSource + ")"
	}
	p.Printf("%s  sysfs %s  rdma netns mode %s  env %s\n\n", p.C(textout.Bold, "kubectl rdma doctor"), orDash(n.SysfsRoot), mode, orDash(n.EnvSource))

	p.Printf("%s\n", p.C(textout.Bold, "ibdev2netdev"))
	vfs := 0
	for _, l := range n.Ibdev2netdev {
		if l.VF && !opt.VFs && hasPF(n.Ibdev2netdev) {
			vfs++
			continue
		}
		nd := l.Netdev
		if nd == "" {
			nd = "(no netdev)"
		} else {
			nd += " (" + l.NetdevState + ")"
		}
		extra := fmt.Sprintf("%s %s", linkName(l.LinkLayer), orDash(l.PortState))
		if l.RecommendedGIDIndex != nil {
			extra += fmt.Sprintf(", RoCEv2 IPv4 GID index %d", *l.RecommendedGIDIndex)
		}
		p.Printf("  %s port %d ==> %s  %s\n", l.Device, l.Port, nd, p.C(textout.Dim, "["+extra+"]"))
	}
	if vfs > 0 {
		p.Printf("  %s\n", p.C(textout.Dim, fmt.Sprintf("… and %d SR-IOV VF device(s) (--vfs lists them)", vfs)))
	}
	if len(n.Ibdev2netdev) == 0 {
		p.Printf("  (no RDMA devices)\n")
	}

	var gids []GIDLine
	vfDev := map[string]bool{}
	for _, l := range n.Ibdev2netdev {
		if l.VF && !opt.VFs && hasPF(n.Ibdev2netdev) {
			vfDev[l.Device] = true
		}
	}
	for _, g := range n.GIDs {
		if !vfDev[g.Device] {
			gids = append(gids, g)
		}
	}
	if len(gids) > 0 {
		p.Printf("\n%s\n", p.C(textout.Bold, "show_gids"))
		var sb strings.Builder
		tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "  DEV\tPORT\tINDEX\tGID\tIPv4\tVER\tDEV\n")
		fmt.Fprintf(tw, "  ---\t----\t-----\t---\t------------\t---\t---\n")
		for _, g := range gids {
			fmt.Fprintf(tw, "  %s\t%d\t%d\t%s\t%s\t%s\t%s\n", g.Device, g.Port, g.Index, g.GID, g.IPv4, g.Type, g.Netdev)
		}
		_ = tw.Flush()
		p.Printf("%s", sb.String())
	}

	bySec := map[string][]Check{}
	for _, c := range r.Checks {
		bySec[c.Section] = append(bySec[c.Section], c)
	}
	idw := 0
	for _, c := range r.Checks {
		idw = max(idw, len(c.ID))
	}
	for _, sec := range Sections {
		cs := bySec[sec]
		if len(cs) == 0 {
			continue
		}
		p.Printf("\n%s\n", p.C(textout.Bold, strings.ToUpper(sec)))
		for _, c := range cs {
			st := strings.ToUpper(string(c.Status))
			switch c.Status {
			case Pass:
				st = p.C(textout.Green, st)
			case Warn:
				st = p.C(textout.Yellow, st)
			case Fail:
				st = p.C(textout.Red, st)
			}
			p.Printf("  %s  %-*s  %s\n", st, idw, c.ID, c.Message)
			if c.Fix != "" {
				p.Printf("  %s  %-*s  %s %s\n", "    ", idw, "", p.C(textout.Dim, "fix:"), c.Fix)
			}
		}
	}
	s := r.Summary
	res := strings.ToUpper(s.Result)
	switch s.Result {
	case string(Pass):
		res = p.C(textout.Green, res)
	case string(Warn):
		res = p.C(textout.Yellow, res)
	case string(Fail):
		res = p.C(textout.Red, res)
	}
	p.Printf("\n%s: %d pass, %d warn, %d fail\n", res, s.Pass, s.Warn, s.Fail)
	return p.Err
}

func hasPF(ls []IbdevLine) bool {
	for _, l := range ls {
		if !l.VF {
			return true
		}
	}
	return false
}
