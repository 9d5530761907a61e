package main

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"

	"github.com/rdmanet/rdmanet/internal/deviceplugin"
	"github.com/rdmanet/rdmanet/internal/deviceplugin/config"
	"github.com/rdmanet/rdmanet/internal/inventory"
	"github.com/rdmanet/rdmanet/test/dragpu"
)

// Per GPU a pod requests one CPU and 8 GiB (the shape of
// examples/dra/gpu-nic-aligned-x8.yaml's Job: 8 CPUs, 64 GiB); a node has
// 64 CPUs and 512 GiB. The equal CPU and memory ratios make
// kube-scheduler's NodeResourcesBalancedAllocation score the same on every
// node, so placement follows NodeResourcesFit's LeastAllocated score.
const (
	nodeCPU    = 64
	nodeMemGiB = 512
	podMemGiB  = 8 // per GPU
)

// node is one simulated 8-GPU server: the sysfs fixture
// (test/dragpu.NewPairedNode: per PCIe root one H100 and one ConnectX-7
// with vfs VFs; the first half of the roots on NUMA 0, the rest on 1), its
// GPUs as the DRA stand-in discovers them and its VF pool as rdmanet's
// agent builds it (inventory + device plugin pool config).
type node struct {
	name  string
	fx    *dragpu.PairedNode
	inv   *inventory.Node
	pools []*deviceplugin.Pool
	gpus  []gpu
	nics  *deviceplugin.Pool // the exclusive VF pool
}

type gpu struct {
	dragpu.GPU
	numa int
}

// newNodes writes n fixture nodes under dir.
func newNodes(dir string, n, pairs, vfs int) ([]*node, error) {
	var out []*node
	for i := range n {
		name := fmt.Sprintf("gpu-node-%d", i)
		fx, err := dragpu.NewPairedNode(filepath.Join(dir, name), pairs, vfs)
		if err != nil {
			return nil, err
		}
		specs, err := config.Parse("pools.json", []byte(fx.PoolConfig()))
		if err != nil {
			return nil, err
		}
		inv, err := inventory.Discover(inventory.Options{SysfsRoot: fx.Root, DefaultRouteLinks: []string{"eno1"}, NetnsModeFlag: "exclusive"})
		if err != nil {
			return nil, fmt.Errorf("%s: inventory: %w", name, err)
		}
		pools, err := deviceplugin.Build(inv, specs)
		if err != nil {
			return nil, fmt.Errorf("%s: pools: %w", name, err)
		}
		if len(pools) != 1 || len(pools[0].Devices) != pairs*vfs {
			return nil, fmt.Errorf("%s: want one pool of %d VFs, got %d pools", name, pairs*vfs, len(pools))
		}
		for _, d := range pools[0].Devices {
			if d.Health != deviceplugin.Healthy {
				return nil, fmt.Errorf("%s: VF %s is %s: %s", name, d.ID, d.Health, d.Reason)
			}
		}
		found, err := dragpu.Discover(fx.Root)
		if err != nil {
			return nil, err
		}
		nd := &node{name: name, fx: fx, inv: inv, pools: pools, nics: pools[0]}
		for _, g := range found {
			numa := -1
			for _, p := range fx.Pairs {
				if p.GPU.BDF == g.BDF {
					numa = p.GPU.NUMA
				}
			}
			if numa < 0 || fx.RootOf(g.BDF) != g.PCIeRoot {
				return nil, fmt.Errorf("%s: GPU %s: NUMA %d, pcieRoot %s, fixture root %s", name, g.BDF, numa, g.PCIeRoot, fx.RootOf(g.BDF))
			}
			nd.gpus = append(nd.gpus, gpu{GPU: g, numa: numa})
		}
		if len(nd.gpus) != pairs {
			return nil, fmt.Errorf("%s: %d GPUs found, want %d", name, len(nd.gpus), pairs)
		}
		out = append(out, nd)
	}
	return out, nil
}

// podSpec is one training pod of the mix: g GPUs and g NICs.
type podSpec struct {
	name string
	gpus int
}

// podMix is small 1+1 pods and large 4+4 pods (large of them with
// largeGPUs each) in the seed's random order.
func podMix(small, large, largeGPUs int, seed uint64) []podSpec {
	var pods []podSpec
	for i := range small {
		pods = append(pods, podSpec{name: fmt.Sprintf("train-1g-%02d", i), gpus: 1})
	}
	for i := range large {
		pods = append(pods, podSpec{name: fmt.Sprintf("train-%dg-%02d", largeGPUs, i), gpus: largeGPUs})
	}
	r := rand.New(rand.NewPCG(seed, 0x6f72646572)) // "order"
	r.Shuffle(len(pods), func(i, j int) { pods[i], pods[j] = pods[j], pods[i] })
	return pods
}
