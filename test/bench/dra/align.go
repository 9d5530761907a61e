package main

import "fmt"

// Alignment: a NIC allocation is aligned when it sits under the same PCIe
// root complex as a GPU of the same pod that no other NIC of the pod is
// already counted against (GPUDirect RDMA without crossing the CPU
// interconnect). Two ways to pair:
//
//   - pairedAligned, for DRA claims: the claim names its pairs (requests
//     gpu-i and nic-i), so pair i is aligned when its two devices share a
//     root. This is what the pcieRoot constraints promise.
//   - matchedAligned, for the device-plugin path: kubelet hands the
//     container a set of GPUs and a set of NICs with no pairing, and the
//     application (NCCL) pairs each GPU with its nearest NIC, so the
//     generous measure is the largest one-to-one matching of NICs to GPUs
//     under the same root. Roots are equivalence classes, so that matching
//     is, per root, min(GPUs under it, NICs under it).
//
// An empty root ("") is an unknown device and never aligned.

// pairedAligned counts the pairs whose GPU root equals their NIC root;
// gpuRoots[i] and nicRoots[i] are pair i.
func pairedAligned(gpuRoots, nicRoots []string) (int, error) {
	if len(gpuRoots) != len(nicRoots) {
		return 0, fmt.Errorf("%d GPU roots but %d NIC roots: pairs need one of each", len(gpuRoots), len(nicRoots))
	}
	n := 0
	for i := range gpuRoots {
		if gpuRoots[i] != "" && gpuRoots[i] == nicRoots[i] {
			n++
		}
	}
	return n, nil
}

// matchedAligned counts the NICs that a one-to-one matching can pair with
// a GPU under the same root.
func matchedAligned(gpuRoots, nicRoots []string) int {
	gpus := map[string]int{}
	for _, r := range gpuRoots {
		if r != "" {
			gpus[r]++
		}
	}
	n := 0
	for _, r := range nicRoots {
		if gpus[r] > 0 {
			gpus[r]--
			n++
		}
	}
	return n
}

// share is aligned NIC allocations over all NIC allocations of the
// scheduled pods.
type share struct {
	aligned, total int
}

func (s *share) add(aligned, total int) {
	s.aligned += aligned
	s.total += total
}

// String is the percentage with one decimal; "n/a" without allocations.
func (s share) String() string {
	if s.total == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(s.aligned)/float64(s.total))
}
