package sim

// The demo's result (Report and its parts) and the summaries and --keep commands that fill it.

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
)

// Report is the demo's result (also its -o json form).
type Report struct {
	Pods    []PodReport `json:"pods"`
	Cleanup string      `json:"cleanup"` // "clean", or what leaked
	Summary Summary     `json:"summary"`
}

// PodReport is one pod's attachment.
type PodReport struct {
	Name          string              `json:"name"`
	Namespace     string              `json:"namespace"`
	Mode          string              `json:"mode"`
	Node          string              `json:"node"`
	Netns         string              `json:"netns"`
	ContainerID   string              `json:"container_id,omitempty"`
	Interfaces    []Interface         `json:"interfaces"`
	DefaultRoute  string              `json:"default_route"` // interface with the default route ("" = none)
	Devices       map[string][]string `json:"devices"`       // resource -> device IDs (kubelet's allocation)
	DeviceNodes   []string            `json:"device_nodes"`  // from Allocate
	Device        string              `json:"device"`        // human form: VF or HCA
	RDMA          string              `json:"rdma"`          // RDMA device placement
	NCCL          []EnvVar            `json:"nccl"`
	Notes         []string            `json:"notes,omitempty"`
	NetworkStatus json.RawMessage     `json:"network_status,omitempty"`
	InfiniBand    *IBReport           `json:"infiniband,omitempty"` // the IB modes: GUID and PKey, or the IPoIB child
	AllocMS       int64               `json:"alloc_ms"`
	AttachMS      int64               `json:"attach_ms"` // CNI ADD (0 for hostNetwork: no CNI runs)
	DetachMS      int64               `json:"detach_ms"`
	Error         string              `json:"error,omitempty"`
}

// Interface is one interface a pod sees.
type Interface struct {
	Name   string   `json:"name"`
	IPs    []string `json:"ips"`
	PCI    string   `json:"pci"`
	MAC    string   `json:"mac,omitempty"`
	Kind   string   `json:"kind,omitempty"`
	Routes []string `json:"routes,omitempty"`
}

// EnvVar is one NCCL setting that fits the pod.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Why   string `json:"why,omitempty"`
}

// Summary is the run's overview.
type Summary struct {
	PodsPerMode int                    `json:"pods_per_mode"`
	Modes       map[string]ModeSummary `json:"modes"`
	Cycles      []CycleSummary         `json:"cycles"`
	Nodes       []NodeSummary          `json:"nodes"`
	Simulated   string                 `json:"simulated"`
	HostChecked string                 `json:"host_checked"`
	TotalMS     int64                  `json:"total_ms"`
	Kept        bool                   `json:"kept"`
	Commands    []string               `json:"commands,omitempty"` // --keep: how to look and clean up
}

// ModeSummary aggregates a mode's attach times (last round).
type ModeSummary struct {
	Pods        int   `json:"pods"`
	Attached    int   `json:"attached"`
	AttachP50MS int64 `json:"attach_p50_ms"`
	AttachMaxMS int64 `json:"attach_max_ms"`
}

// CycleSummary is one attach + detach round.
type CycleSummary struct {
	AttachWallMS int64  `json:"attach_wall_ms"`
	DetachWallMS int64  `json:"detach_wall_ms"`
	Cleanup      string `json:"cleanup"`
}

// NodeSummary describes a simulated node.
type NodeSummary struct {
	Name          string   `json:"name"`
	RDMANetnsMode string   `json:"rdma_netns_mode"`
	Host          string   `json:"host_netns"`
	Modes         []string `json:"modes"`
	Pools         []string `json:"pools"`
	RecorderLog   string   `json:"recorder_log"`
}

func verdict(diff []string) string {
	if len(diff) == 0 {
		return "clean"
	}
	return strings.Join(diff, "; ")
}

func modeSummaries(runs []*podRun) map[string]ModeSummary {
	by := map[string][]int64{}
	out := map[string]ModeSummary{}
	for _, r := range runs {
		s := out[r.mode]
		s.Pods++
		if r.rep.Error == "" {
			s.Attached++
			by[r.mode] = append(by[r.mode], r.rep.AttachMS)
		}
		out[r.mode] = s
	}
	for mode, ts := range by {
		sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
		s := out[mode]
		s.AttachP50MS, s.AttachMaxMS = ts[(len(ts)-1)/2], ts[len(ts)-1]
		out[mode] = s
	}
	return out
}

func keepCommands(l layout, st *RunState, runs []*podRun, cleanup string) []string {
	var out []string
	out = append(out, fmt.Sprintf("ip netns list | grep %s-", l.Prefix))
	shown := map[string]bool{}
	for _, r := range runs {
		if shown[r.mode] {
			continue
		}
		shown[r.mode] = true
		if r.netns != nil {
			out = append(out, fmt.Sprintf("ip netns exec %s ip -br addr            # %s pod %s", l.podNS(r.pod.Name), r.mode, r.pod.Name))
			out = append(out, fmt.Sprintf("ip netns exec %s ip route", l.podNS(r.pod.Name)))
			out = append(out, fmt.Sprintf("cat %s", filepath.Join(l.statusDir(), r.pod.Namespace+"_"+r.pod.Name+".json")))
		}
	}
	for _, d := range st.Nodes {
		out = append(out, fmt.Sprintf("ip netns exec %s ip -br link            # simulated node %s (RDMA netns mode %s)", l.hostNS(d.Name), d.Name, d.Mode))
		out = append(out, fmt.Sprintf("cat %s   # recorded VF settings and RDMA moves", filepath.Join(l.nodeDir(d.Name), "netops.json.log")))
	}
	out = append(out, cleanup+workDirFlag(l.WorkDir))
	return out
}

func workDirFlag(dir string) string {
	if dir == DefaultWorkDir {
		return ""
	}
	return " --work-dir " + dir
}
