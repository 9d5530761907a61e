package agent

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/rdmanet/rdmanet/internal/deviceplugin"
	"github.com/rdmanet/rdmanet/internal/inventory"
)

// Report is the --once output: what a configuration selects on this node.
type Report struct {
	Pools []*deviceplugin.Pool `json:"pools"`
	// SkippedPools are pools of the configuration rdmanet does not serve;
	// ConfigWarnings what the configuration files were read with
	// (AddConfig).
	SkippedPools   []SkippedPool   `json:"skipped_pools"`
	ConfigWarnings []ConfigWarning `json:"config_warnings"`
	Node           NodeReport      `json:"node"`
}

// AddConfig adds the configuration's skipped pools and warnings.
func (r *Report) AddConfig(c *Config) {
	r.SkippedPools = append(r.SkippedPools, c.Skipped...)
	r.ConfigWarnings = append(r.ConfigWarnings, c.Warnings...)
}

// NodeReport summarises the node.
type NodeReport struct {
	RDMANetnsMode   string   `json:"rdma_netns_mode"`
	NetnsModeSource string   `json:"rdma_netns_mode_source"`
	RDMACM          bool     `json:"rdma_cm"`
	Functions       int      `json:"network_functions"`
	RDMADevices     int      `json:"rdma_devices"`
	DefaultRoute    []string `json:"default_route_functions"`
	Problems        []string `json:"problems"`
}

// NewReport builds the report of a snapshot.
func NewReport(s *Snapshot) Report {
	r := Report{Pools: s.Pools, Node: NodeReport{
		RDMANetnsMode: s.Node.RDMANetnsMode, NetnsModeSource: s.Node.NetnsModeSource,
		RDMACM: s.Node.RDMACM, Functions: len(s.Node.Functions), Problems: s.Node.Problems,
		DefaultRoute: []string{},
	}}
	if r.Pools == nil {
		r.Pools = []*deviceplugin.Pool{}
	}
	r.SkippedPools, r.ConfigWarnings = []SkippedPool{}, []ConfigWarning{}
	if r.Node.Problems == nil {
		r.Node.Problems = []string{}
	}
	for _, f := range s.Node.Functions {
		r.Node.RDMADevices += len(f.RDMA)
		if f.DefaultRoute {
			d := fmt.Sprintf("%s (%s)", f.BDF, f.DefaultRouteLabel())
			if f.DefaultRouteVia != "" {
				d = fmt.Sprintf("%s (%s, under %s)", f.BDF, f.DefaultRouteLabel(), f.DefaultRouteVia)
			}
			r.Node.DefaultRoute = append(r.Node.DefaultRoute, d)
		}
	}
	return r
}

// WriteJSON prints the report as one JSON object.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText prints the report for people.
func (r Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "node: %d network functions, %d RDMA devices, RDMA netns mode %s (from %s), rdma_cm %v\n",
		r.Node.Functions, r.Node.RDMADevices, r.Node.RDMANetnsMode, r.Node.NetnsModeSource, r.Node.RDMACM)
	if len(r.Node.DefaultRoute) > 0 {
		fmt.Fprintf(w, "default route on: %s (never handed out)\n", strings.Join(r.Node.DefaultRoute, ", "))
	}
	for _, p := range r.Node.Problems {
		fmt.Fprintf(w, "  ! %s\n", p)
	}
	for _, c := range r.ConfigWarnings {
		fmt.Fprintf(w, "config warning: %s\n", c.Message)
	}
	for _, p := range r.SkippedPools {
		fmt.Fprintf(w, "pool %s (%s): not served by rdmanet: %s\n", p.Resource, p.File, p.Reason)
	}
	for _, p := range r.Pools {
		fmt.Fprintf(w, "\npool %s\n", p.Summary())
		if len(p.HCAs) > 0 {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "  HCA\tNETDEV\tRDMA\tLINK\tNUMA\tDEVICE NODES\tHEALTH")
			for _, h := range p.HCAs {
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", h.PCI, h.Netdev, h.RDMA, h.LinkLayer, inventory.NUMALabel(h.NUMA), strings.Join(h.CharDevs, ","), health(h.Health, h.Reason))
			}
			tw.Flush()
		} else if len(p.Devices) > 0 {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "  DEVICE\tPF\tVF\tNETDEV\tRDMA\tLINK\tNUMA\tPCIE ROOT\tHEALTH")
			for _, d := range p.Devices {
				fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", d.ID, d.PFNetdev, d.VFIndex, d.Netdev, d.RDMA, d.LinkLayer, inventory.NUMALabel(d.NUMA), d.PCIRoot, health(d.Health, d.Reason))
			}
			tw.Flush()
		}
		for _, pr := range p.Problems {
			fmt.Fprintf(w, "  ! %s\n", pr)
		}
	}
	return nil
}

func health(h, reason string) string {
	if reason == "" {
		return h
	}
	return h + " (" + reason + ")"
}
