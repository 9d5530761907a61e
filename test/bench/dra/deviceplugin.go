package main

// The device-plugin path, modelled (not run): what kube-scheduler and
// kubelet v1.37.2 do with pods that ask for nvidia.com/gpu and rdmanet's
// VF resource as extended resources.
//
// Why a model: kubelet's device manager (k8s.io/kubernetes
// pkg/kubelet/cm/devicemanager) can only be built by its exported
// constructor NewManagerImpl, which serves the fixed socket
// /var/lib/kubelet/device-plugins/kubelet.sock; eight nodes would need
// eight mount namespaces (test/kubelet does one, as root), and
// k8s.io/kubernetes is a dependency only of that separate module. The
// model follows the code of v1.37.2 step by step instead:
//
//   - placement (kube-scheduler, default profile): NodeResourcesFit
//     filters on the free counts of both extended resources, CPU and
//     memory; the LeastAllocated score over CPU and memory picks the node
//     (NodeResourcesBalancedAllocation scores every node alike here, see
//     fixture.go), ties broken uniformly at random as selectHost does.
//   - admission (topologymanager, scope container): policy
//     single-numa-node asks the device manager for hints
//     (generateDeviceTopologyHints: a single-NUMA mask is a preferred hint
//     when enough devices are free on it), keeps the preferred
//     single-NUMA hints, merges GPU and NIC hints by AND and picks the
//     narrowest, then the lowest, NUMA node that has both; no such node:
//     the pod is rejected (TopologyAffinityError; it fails, it is not
//     rescheduled). Policy none (kubelet's default) has no hint.
//   - allocation (devicemanager devicesToAllocate, filterByAffinity): the
//     free devices on the hint's NUMA node are "aligned"; when more are
//     aligned than needed the plugin's GetPreferredAllocation chooses among
//     them, when exactly enough all are taken, otherwise (policy none: none
//     are aligned) the plugin chooses among all free devices. What the
//     plugin leaves open kubelet fills in Go map order (sets.Set), modelled
//     as a seeded shuffle; the lists kubelet passes to the plugin are map
//     order too (UnsortedList).
//   - GetPreferredAllocation, both plugins implement it: rdmanet's device
//     plugin is called for real (internal/deviceplugin Pool.Preferred over
//     the pool the agent builds from the fixture); NVIDIA's
//     k8s-device-plugin answers for whole GPUs with go-gpuallocator's
//     best-effort policy, ported below with its PCIe pair scores (same
//     NUMA node 20, across 10; NVLink through NVSwitch adds the same to
//     every pair and does not change the choice). Neither plugin knows the
//     other resource: nothing pairs a GPU with a NIC on the device-plugin
//     path except the shared NUMA node.

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
)

const (
	policyNone       = "none"
	policySingleNUMA = "single-numa-node"
)

// dpDevice is one device of an extended resource as kubelet knows it.
type dpDevice struct {
	id   string
	numa int
	root string // PCIe root, for the measurement only
}

// preferFunc is a plugin's GetPreferredAllocation.
type preferFunc func(available, mustInclude []string, size int) []string

// dpResource is one extended resource of a node: its devices (kubelet's
// healthyDevices), the free ones and the plugin's preference.
type dpResource struct {
	devs    map[string]dpDevice
	free    map[string]bool
	prefer  preferFunc
	numaMax int
}

func (r *dpResource) freeOn(numa int) int {
	n := 0
	for id := range r.free {
		if r.devs[id].numa == numa {
			n++
		}
	}
	return n
}

// dpNode is a node's state on the device-plugin path.
type dpNode struct {
	n        *node
	gpu, nic *dpResource
	cpuMilli int64 // requested by admitted pods
	memBytes int64
}

func newDPNode(n *node) *dpNode {
	d := &dpNode{n: n}
	d.gpu = &dpResource{devs: map[string]dpDevice{}, free: map[string]bool{}}
	byBDF := map[string]gpu{}
	for _, g := range n.gpus {
		d.gpu.devs[g.BDF] = dpDevice{id: g.BDF, numa: g.numa, root: g.PCIeRoot}
		d.gpu.free[g.BDF] = true
		d.gpu.numaMax = max(d.gpu.numaMax, g.numa)
		byBDF[g.BDF] = g
	}
	d.gpu.prefer = func(available, mustInclude []string, size int) []string {
		conv := func(ids []string) []*gdev {
			var out []*gdev
			for _, id := range ids {
				out = append(out, &gdev{id: id, numa: byBDF[id].numa})
			}
			return out
		}
		avail := conv(available)
		var req []*gdev
		for _, id := range mustInclude {
			for _, a := range avail { // the same pointers, as the allocator compares them
				if a.id == id {
					req = append(req, a)
				}
			}
		}
		var ids []string
		for _, g := range bestEffort(avail, req, size) {
			if g != nil {
				ids = append(ids, g.id)
			}
		}
		return ids
	}
	d.nic = &dpResource{devs: map[string]dpDevice{}, free: map[string]bool{}, prefer: n.nics.Preferred}
	for _, v := range n.nics.Devices {
		d.nic.devs[v.ID] = dpDevice{id: v.ID, numa: v.NUMA, root: n.fx.RootOf(v.PCI)}
		d.nic.free[v.ID] = true
		d.nic.numaMax = max(d.nic.numaMax, v.NUMA)
	}
	return d
}

func podCPU(g int) int64 { return int64(g) * 1000 }
func podMem(g int) int64 { return int64(g) * podMemGiB << 30 }

// fits is NodeResourcesFit's filter.
func (d *dpNode) fits(g int) bool {
	return len(d.gpu.free) >= g && len(d.nic.free) >= g &&
		d.cpuMilli+podCPU(g) <= nodeCPU*1000 && d.memBytes+podMem(g) <= int64(nodeMemGiB)<<30
}

// score is NodeResourcesFit's LeastAllocated score (CPU and memory,
// weight 1 each, integer arithmetic as the plugin does it).
func (d *dpNode) score(g int) int64 {
	least := func(requested, capacity int64) int64 { return (capacity - requested) * 100 / capacity }
	return (least(d.cpuMilli+podCPU(g), nodeCPU*1000) + least(d.memBytes+podMem(g), int64(nodeMemGiB)<<30)) / 2
}

// errTopologyAffinity is kubelet's admission failure under
// single-numa-node.
type errTopologyAffinity struct{ gpus int }

func (e errTopologyAffinity) Error() string {
	return fmt.Sprintf("TopologyAffinityError: no NUMA node has %d free GPUs and %d free NICs", e.gpus, e.gpus)
}

// admit is kubelet admitting a pod of g GPUs and g NICs: the topology
// manager's hint, then the device manager's allocation of each resource.
func (d *dpNode) admit(g int, policy string, rng *rand.Rand) (gpus, nics []dpDevice, err error) {
	hint := -1 // nil NUMANodeAffinity
	if policy == policySingleNUMA {
		for numa := 0; numa <= max(d.gpu.numaMax, d.nic.numaMax); numa++ {
			if d.gpu.freeOn(numa) >= g && d.nic.freeOn(numa) >= g {
				hint = numa
				break
			}
		}
		if hint < 0 {
			return nil, nil, errTopologyAffinity{g}
		}
	}
	gi, err := devicesToAllocate(d.gpu, g, hint, rng)
	if err != nil {
		return nil, nil, err
	}
	ni, err := devicesToAllocate(d.nic, g, hint, rng)
	if err != nil {
		return nil, nil, err
	}
	for _, id := range gi {
		delete(d.gpu.free, id)
		gpus = append(gpus, d.gpu.devs[id])
	}
	for _, id := range ni {
		delete(d.nic.free, id)
		nics = append(nics, d.nic.devs[id])
	}
	d.cpuMilli += podCPU(g)
	d.memBytes += podMem(g)
	return gpus, nics, nil
}

// devicesToAllocate is the device manager's choice of needed free devices
// of r, given the topology hint (-1: none).
func devicesToAllocate(r *dpResource, needed, hint int, rng *rand.Rand) ([]string, error) {
	mapOrder := func(ids []string) []string {
		out := slices.Clone(ids)
		sort.Strings(out)
		rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
		return out
	}
	var available, aligned, rest []string
	for id := range r.free {
		available = append(available, id)
		if hint >= 0 && r.devs[id].numa == hint {
			aligned = append(aligned, id)
		} else {
			rest = append(rest, id)
		}
	}
	if len(available) < needed {
		return nil, fmt.Errorf("requested number of devices unavailable: requested %d, available %d", needed, len(available))
	}
	var allocated []string
	take := func(ids []string) bool {
		for _, id := range ids {
			if !slices.Contains(allocated, id) {
				allocated = append(allocated, id)
				if len(allocated) == needed {
					return true
				}
			}
		}
		return false
	}
	within := func(ids, set []string) []string {
		var out []string
		for _, id := range ids {
			if slices.Contains(set, id) {
				out = append(out, id)
			}
		}
		return out
	}
	if needed < len(aligned) {
		pref := r.prefer(mapOrder(aligned), nil, needed)
		if take(mapOrder(within(pref, aligned))) || take(mapOrder(aligned)) {
			return allocated, nil
		}
		return nil, fmt.Errorf("allocated %d of %d", len(allocated), needed)
	}
	if take(mapOrder(aligned)) {
		return allocated, nil
	}
	pref := r.prefer(mapOrder(available), mapOrder(allocated), needed)
	if take(mapOrder(within(pref, available))) || take(mapOrder(rest)) {
		return allocated, nil
	}
	return nil, fmt.Errorf("allocated %d of %d", len(allocated), needed)
}

// dpResult is one policy's outcome.
type dpResult struct {
	policy      string
	scheduled   int // admitted by kubelet
	pending     int // no node fits (kube-scheduler: Unschedulable)
	rejected    int // placed, then refused by kubelet's topology manager
	nics        share
	alignedPods int // pods whose every NIC is aligned
}

// runDP places and admits the pods in order on fresh nodes.
func runDP(nodes []*node, pods []podSpec, policy string, seed uint64) (dpResult, error) {
	rng := rand.New(rand.NewPCG(seed, 0x6b7562656c6574)) // "kubelet"
	res := dpResult{policy: policy}
	state := make([]*dpNode, len(nodes))
	for i, n := range nodes {
		state[i] = newDPNode(n)
	}
	for _, p := range pods {
		// selectHost: the highest score, ties uniformly at random
		// (reservoir sampling over the feasible nodes).
		var pick *dpNode
		var best int64
		ties := 0
		for _, d := range state {
			if !d.fits(p.gpus) {
				continue
			}
			s := d.score(p.gpus)
			switch {
			case pick == nil || s > best:
				pick, best, ties = d, s, 1
			case s == best:
				ties++
				if rng.IntN(ties) == 0 {
					pick = d
				}
			}
		}
		if pick == nil {
			res.pending++
			continue
		}
		gpus, nics, err := pick.admit(p.gpus, policy, rng)
		if err != nil {
			if _, ok := err.(errTopologyAffinity); ok {
				res.rejected++
				continue
			}
			return res, fmt.Errorf("%s: pod %s on %s: %w", policy, p.name, pick.n.name, err)
		}
		res.scheduled++
		var gr, nr []string
		for _, g := range gpus {
			gr = append(gr, g.root)
		}
		for _, n := range nics {
			nr = append(nr, n.root)
		}
		a := matchedAligned(gr, nr)
		res.nics.add(a, len(nics))
		if a == len(nics) {
			res.alignedPods++
		}
	}
	return res, nil
}

// ---- NVIDIA go-gpuallocator's best-effort policy, ported (whole GPUs). ----

type gdev struct {
	id   string
	numa int
}

// pairScore: P2PLinkSameCPU 20, P2PLinkCrossCPU 10 (every GPU sits under
// a root complex of its own, so no closer PCIe link exists).
func pairScore(a, b *gdev) int {
	if a == nil || b == nil || a == b {
		return 0
	}
	if a.numa == b.numa {
		return 20
	}
	return 10
}

func setScore(set []*gdev) int {
	s := 0
	for i := range set {
		for j := i + 1; j < len(set); j++ {
			s += pairScore(set[i], set[j])
		}
	}
	return s
}

func containsAll(set, sub []*gdev) bool {
	for _, g := range sub {
		if !slices.Contains(set, g) {
			return false
		}
	}
	return true
}

func padding(set []*gdev) int {
	n := 0
	for _, g := range set {
		if g == nil {
			n++
		}
	}
	return n
}

// bestEffort: the partition of the available GPUs into sets of size with
// the highest total score, then its best set that holds required.
func bestEffort(available, required []*gdev, size int) []*gdev {
	if size <= 0 || len(available) < size || len(required) > size {
		return nil
	}
	var best [][]*gdev
	bestScore := 0
	iteratePartitions(available, size, func(cand [][]*gdev) {
		ok := false
		for _, set := range cand {
			if containsAll(set, required) && padding(set) == 0 {
				ok = true
			}
		}
		if !ok {
			return
		}
		s := 0
		for _, set := range cand {
			s += setScore(set)
		}
		if s > bestScore || best == nil {
			best = make([][]*gdev, len(cand))
			for i := range cand {
				best[i] = slices.Clone(cand[i])
			}
			bestScore = s
		}
	})
	var filtered [][]*gdev
	for _, set := range best {
		if containsAll(set, required) {
			filtered = append(filtered, set)
		}
	}
	if len(filtered) == 0 {
		return nil
	}
	bestSet := filtered[0]
	bs := setScore(bestSet)
	for _, set := range filtered[1:] {
		if s := setScore(set); s > bs {
			bestSet, bs = set, s
		}
	}
	return bestSet
}

// iterateSets calls cb with every set of size devices, in index order.
func iterateSets(devs []*gdev, size int, cb func([]*gdev)) {
	if size <= 0 || size > len(devs) {
		return
	}
	var rec func(start int, acc []*gdev)
	rec = func(start int, acc []*gdev) {
		if len(acc) == size {
			cb(slices.Clone(acc))
			return
		}
		for i := start; i < len(devs); i++ {
			rec(i+1, append(acc, devs[i]))
		}
	}
	rec(0, nil)
}

// iteratePartitions calls cb with every partition of the devices (padded
// with nil to a multiple of size) into sets of size, each set holding no
// padding or all of it.
func iteratePartitions(devs []*gdev, size int, cb func([][]*gdev)) {
	if size <= 0 || size > len(devs) {
		return
	}
	if size == 1 {
		for _, d := range devs {
			cb([][]*gdev{{d}})
		}
		return
	}
	padded := slices.Clone(devs)
	for len(padded)%size != 0 {
		padded = append(padded, nil)
	}
	pad := padding(padded)
	var iterate func(devs []*gdev, acc [][]*gdev)
	iterate = func(devs []*gdev, acc [][]*gdev) {
		if size == len(devs) {
			cb(append(slices.Clone(acc), devs))
			return
		}
		iterateSets(devs[1:], size-1, func(set []*gdev) {
			set = append([]*gdev{devs[0]}, set...)
			if p := padding(set); p != 0 && p != pad {
				return
			}
			var remaining []*gdev
			for _, g := range devs {
				if !slices.Contains(set, g) {
					remaining = append(remaining, g)
				}
			}
			iterate(remaining, append(slices.Clone(acc), set))
		})
	}
	iterate(padded, nil)
}
