package main

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// takeGPUs marks the first per-NUMA-node count GPUs of each NUMA node used.
func takeGPUs(d *dpNode, perNUMA map[int]int) {
	for _, g := range d.n.gpus {
		if perNUMA[g.numa] > 0 {
			delete(d.gpu.free, g.BDF)
			perNUMA[g.numa]--
		}
	}
}

func TestKubeletModel(t *testing.T) {
	nodes, err := newNodes(t.TempDir(), 1, 8, 2)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		policy   string
		taken    map[int]int // GPUs in use per NUMA node before the pod
		gpus     int
		wantErr  bool
		wantNUMA int // -1: devices may span NUMA nodes
	}{
		{name: "single-numa-node: 1+1 on an empty node lands on NUMA 0", policy: policySingleNUMA, gpus: 1, wantNUMA: 0},
		{name: "single-numa-node: 4+4 on an empty node takes NUMA 0 whole", policy: policySingleNUMA, gpus: 4, wantNUMA: 0},
		{name: "single-numa-node: NUMA 0 busy, 4+4 goes to NUMA 1", policy: policySingleNUMA, taken: map[int]int{0: 1}, gpus: 4, wantNUMA: 1},
		{name: "single-numa-node: 4 free GPUs split 2+2, kubelet rejects", policy: policySingleNUMA, taken: map[int]int{0: 2, 1: 2}, gpus: 4, wantErr: true},
		{name: "none: 4 free GPUs split 2+2 are admitted across NUMA nodes", policy: policyNone, taken: map[int]int{0: 2, 1: 2}, gpus: 4, wantNUMA: -1},
		{name: "none: 4+4 on an empty node, NVIDIA's best effort keeps the GPUs on one NUMA node", policy: policyNone, gpus: 4, wantNUMA: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDPNode(nodes[0])
			takeGPUs(d, tt.taken)
			gpus, nics, err := d.admit(tt.gpus, tt.policy, rand.New(rand.NewPCG(1, 2)))
			if tt.wantErr {
				var tae errTopologyAffinity
				if !errors.As(err, &tae) {
					t.Fatalf("err = %v, want TopologyAffinityError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(gpus) != tt.gpus || len(nics) != tt.gpus {
				t.Fatalf("got %d GPUs, %d NICs; want %d each", len(gpus), len(nics), tt.gpus)
			}
			if tt.wantNUMA >= 0 {
				for _, dev := range append(gpus, nics...) {
					if dev.numa != tt.wantNUMA {
						t.Errorf("%s on NUMA %d, want %d", dev.id, dev.numa, tt.wantNUMA)
					}
				}
			}
		})
	}
}

func TestBestEffortKeepsLargeSetsOnOneNUMANode(t *testing.T) {
	var avail []*gdev
	for i := range 8 {
		avail = append(avail, &gdev{id: string(rune('a' + i)), numa: i / 4})
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		r.Shuffle(len(avail), func(i, j int) { avail[i], avail[j] = avail[j], avail[i] })
		got := bestEffort(avail, nil, 4)
		if len(got) != 4 {
			t.Fatalf("got %d GPUs, want 4", len(got))
		}
		for _, g := range got {
			if g.numa != got[0].numa {
				t.Fatalf("set spans NUMA nodes: %+v", got)
			}
		}
		if one := bestEffort(avail, nil, 1); len(one) != 1 || one[0] != avail[0] {
			t.Fatalf("size 1: got %v, want the first available (%s)", one, avail[0].id)
		}
	}
}
