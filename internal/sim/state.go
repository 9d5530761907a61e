package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/internal/netops"
)

// HostState is what must be the same before the pods came and after they
// left: per simulated node, the host namespace's links (name, kind, MAC,
// MTU, up, addresses), the wire namespace's links, the CNI state files, the
// VF settings and the RDMA device placement the recording netops keeps.
type HostState struct {
	Nodes map[string]NodeState `json:"nodes"`
}

// NodeState is one simulated node's part of HostState.
type NodeState struct {
	Links []LinkState       `json:"links"`
	Wire  []LinkState       `json:"wire"`
	Files map[string]string `json:"files"` // path under the node dir -> content digest (or normalised form)
	VFs   map[string]string `json:"vfs"`   // "<pf>/<vf>" -> settings
	RDMA  map[string]string `json:"rdma"`  // device -> "home" or "moved"
}

// LinkState is one netdev as the comparison sees it.
type LinkState struct {
	Name  string   `json:"name"`
	Kind  string   `json:"kind"`
	MAC   string   `json:"mac"`
	MTU   int      `json:"mtu"`
	Up    bool     `json:"up"`
	Addrs []string `json:"addrs,omitempty"`
}

func (l LinkState) String() string {
	state := "down"
	if l.Up {
		state = "up"
	}
	return fmt.Sprintf("%s (%s, %s, mtu %d, %s, addrs %v)", l.Name, l.Kind, l.MAC, l.MTU, state, l.Addrs)
}

func linkStates(n ns.NetNS) ([]LinkState, error) {
	var out []LinkState
	err := n.Do(func(ns.NetNS) error {
		ls, err := netops.Links()
		if err != nil {
			return err
		}
		for _, l := range ls {
			s := LinkState{Name: l.Name, Kind: l.Kind, MAC: l.MAC.String(), MTU: l.MTU, Up: l.Up}
			as, err := netops.Addrs(l.Name)
			if err != nil {
				return err
			}
			for _, a := range as {
				if a.IP.IsLinkLocalUnicast() {
					continue // IPv6 link-local: derived from the MAC
				}
				s.Addrs = append(s.Addrs, a.String())
			}
			sort.Strings(s.Addrs)
			out = append(out, s)
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

// normaliseFile returns the comparable form of a state file, or "" to
// leave it out. Left out: flock files (empty, no state) and host-local's
// allocation cursor. rdmanet-ipam's block files keep the node's claimed
// blocks by design (a node claims a block once and keeps it); what must
// return to the same value is the number of allocations in them, so a
// block file is compared by that number and one without allocations
// counts as absent; the GUID pool's store (guid-pool/) is compared the
// same way. A network's gateway is reserved in the store once and
// kept, like a claimed block: reservations are not counted, and the node's
// gateway marker files are left out.
func normaliseFile(rel string, b []byte) string {
	base := filepath.Base(rel)
	switch {
	case base == "lock" || strings.HasSuffix(base, ".lock"):
		return ""
	case strings.HasPrefix(base, "last_reserved_ip"):
		return ""
	case strings.HasPrefix(rel, "ipam/") && strings.HasSuffix(base, ".gateway"):
		return ""
	case (strings.HasPrefix(rel, "ipam/") || strings.HasPrefix(rel, "guid-pool/")) && strings.HasSuffix(base, ".json"):
		var v any
		if err := json.Unmarshal(b, &v); err == nil {
			if n := countAllocations(v); n > 0 {
				return fmt.Sprintf("%d allocations", n)
			}
			return "" // an empty claimed block is the same as none
		}
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:8])
}

func countAllocations(v any) int {
	n := 0
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if m, ok := x.(map[string]any); ok && k == "allocations" {
				for _, a := range m {
					if r, _ := a.(map[string]any)["reserved"].(string); r == "" {
						n++ // a pod's, not a reservation (gateway)
					}
				}
				continue
			}
			n += countAllocations(x)
		}
	case []any:
		for _, x := range t {
			n += countAllocations(x)
		}
	}
	return n
}

func (n *node) snapshot() (NodeState, error) {
	devs := make([]string, 0, len(n.fix.RDMAByBD))
	for _, dev := range n.fix.RDMAByBD {
		devs = append(devs, dev)
	}
	sort.Strings(devs)
	return snapshotNode(n.def, n.l, n.host, n.wire, n.rec, devs)
}

// snapshotNode reads one node's state; rdmaDevs are the node's RDMA devices.
func snapshotNode(d nodeDef, l layout, host, wire ns.NetNS, rec *netops.Recorder, rdmaDevs []string) (NodeState, error) {
	s := NodeState{Files: map[string]string{}, VFs: map[string]string{}, RDMA: map[string]string{}}
	var err error
	if s.Links, err = linkStates(host); err != nil {
		return s, fmt.Errorf("node %s host links: %w", d.Name, err)
	}
	if s.Wire, err = linkStates(wire); err != nil {
		return s, fmt.Errorf("node %s wire links: %w", d.Name, err)
	}
	dir := l.nodeDir(d.Name)
	for _, sub := range stateDirs {
		root := filepath.Join(dir, sub)
		err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			if v := normaliseFile(filepath.ToSlash(rel), b); v != "" {
				s.Files[rel] = v
			}
			return nil
		})
		if err != nil && !os.IsNotExist(err) {
			return s, fmt.Errorf("node %s state files: %w", d.Name, err)
		}
	}
	for i := 0; i < d.VFs; i++ {
		if d.IB {
			v, err := ibVFState(rec, i)
			if err != nil {
				return s, err
			}
			s.VFs[fmt.Sprintf("%s/%d", IBExclusivePort, i)] = v
			continue
		}
		st, err := rec.VFState(ExclusivePF, i)
		if err != nil {
			return s, err
		}
		s.VFs[fmt.Sprintf("%s/%d", ExclusivePF, i)] = fmt.Sprintf("%+v", st)
	}
	for _, dev := range rdmaDevs {
		home, err := rec.RDMAHome(dev)
		if err != nil {
			return s, err
		}
		s.RDMA[dev] = map[bool]string{true: "home", false: "moved"}[home]
	}
	return s, nil
}

// Diff lists every difference between two host states; empty means equal.
func (before HostState) Diff(after HostState) []string {
	var out []string
	names := make([]string, 0, len(before.Nodes))
	for n := range before.Nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		b, a := before.Nodes[name], after.Nodes[name]
		out = append(out, diffLinks(name+" host netns", b.Links, a.Links)...)
		out = append(out, diffLinks(name+" wire netns", b.Wire, a.Wire)...)
		out = append(out, diffMap(name+" state file", b.Files, a.Files)...)
		out = append(out, diffMap(name+" VF", b.VFs, a.VFs)...)
		out = append(out, diffMap(name+" RDMA device", b.RDMA, a.RDMA)...)
	}
	return out
}

func diffLinks(where string, before, after []LinkState) []string {
	bm, am := map[string]LinkState{}, map[string]LinkState{}
	for _, l := range before {
		bm[l.Name] = l
	}
	for _, l := range after {
		am[l.Name] = l
	}
	var out []string
	for _, l := range before {
		a, ok := am[l.Name]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s: link %s is gone (was %s)", where, l.Name, l))
		case a.Kind != l.Kind || a.MAC != l.MAC || a.MTU != l.MTU || a.Up != l.Up || !slices.Equal(a.Addrs, l.Addrs):
			out = append(out, fmt.Sprintf("%s: link %s changed: was %s, now %s", where, l.Name, l, a))
		}
	}
	for _, l := range after {
		if _, ok := bm[l.Name]; !ok {
			out = append(out, fmt.Sprintf("%s: new link %s", where, l))
		}
	}
	return out
}

func diffMap(what string, before, after map[string]string) []string {
	var out []string
	keys := map[string]bool{}
	for k := range before {
		keys[k] = true
	}
	for k := range after {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		b, bok := before[k]
		a, aok := after[k]
		switch {
		case !bok:
			out = append(out, fmt.Sprintf("%s %s left behind (%s)", what, k, a))
		case !aok:
			out = append(out, fmt.Sprintf("%s %s is gone (was %s)", what, k, b))
		case a != b:
			out = append(out, fmt.Sprintf("%s %s changed: was %s, now %s", what, k, b, a))
		}
	}
	return out
}

// Summary is a one-line description of what the state covers.
func (s HostState) Summary() string {
	links, files, vfs, rdma := 0, 0, 0, 0
	for _, n := range s.Nodes {
		links += len(n.Links) + len(n.Wire)
		files += len(n.Files)
		vfs += len(n.VFs)
		rdma += len(n.RDMA)
	}
	return fmt.Sprintf("%d nodes: %d links (names, kinds, MACs, MTUs, up/down, addresses); the files under %s (%d before the pods: CNI caches, VF locks, IPAM allocations); %d VF settings; %d RDMA device placements",
		len(s.Nodes), links, strings.Join(stateDirs, ", "), files, vfs, rdma)
}
