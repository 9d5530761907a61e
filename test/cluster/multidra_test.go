//go:build clustertest

package cluster_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rdmanet/rdmanet/internal/dra"
	"github.com/rdmanet/rdmanet/test/cluster"
	"github.com/rdmanet/rdmanet/test/dragpu"
)

// testDRAAcrossNodes: a claim for 4 GPUs and one VF of the seed's pool, all
// under one PCIe root (matchAttribute resource.kubernetes.io/pcieRoot),
// fits only the aligned node (test/cluster/hardware.go: 4 GPUs beside each
// VF PF there, at most 3 on any other node). The real kube-scheduler
// finds it among all nodes' ResourceSlices, both drivers prepare there, and
// the pod runs with net1 on that VF.
func testDRAAcrossNodes(t *testing.T) {
	const ns = "dra-cross"
	want := state.Nodes[cluster.AlignedNodeIndex].Name
	gpus := map[string]map[string]dragpu.GPU{}
	for _, n := range state.Nodes {
		gpus[n.Name] = startGPUDriver(t, n)
	}
	kubectl(t, "create", "ns", ns)
	cleanupNamespace(t, ns)
	tmpl := `apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: gpus-nic, namespace: ` + ns + `}
spec:
  spec:
    devices:
      requests:
        - name: gpu
          exactly: {deviceClassName: ` + dragpu.ClassName + `, allocationMode: ExactCount, count: 4}
        - name: nic
          exactly: {deviceClassName: ` + draClass + `}
      constraints:
        - requests: [gpu, nic]
          matchAttribute: resource.kubernetes.io/pcieRoot
`
	pod := strings.ReplaceAll(draPods(t, ns, "aligned"), "resourceClaimTemplateName: vf", "resourceClaimTemplateName: gpus-nic")
	start := time.Now()
	if err := k.Apply(ctx(t, time.Minute), tmpl+"\n---\n"+pod); err != nil {
		t.Fatal(err)
	}
	p := waitRunning(t, ns, "app="+ns, 1, 4*time.Minute)[0]
	t.Logf("4 GPUs + 1 VF under one PCIe root: pod Running on %s %.1fs after apply", p.Spec.NodeName, time.Since(start).Seconds())
	if p.Spec.NodeName != want {
		t.Fatalf("pod on %s; only %s has 4 GPUs and a VF of the pool under one PCIe root", p.Spec.NodeName, want)
	}
	vf, _ := checkExclusive(t, ns, p.Name, nil)

	// The allocation: 4 GPUs of that node and the VF net1 is on, one root.
	c := podClaim(t, ns, p.Name)
	nicRoot := devicePCIeRoots(t, "spec.driver="+dra.DriverName+",spec.nodeName="+want)
	var nic string
	roots := map[string]int{}
	for _, r := range c.Status.Allocation.Devices.Results {
		switch r.Driver {
		case dragpu.DriverName:
			g, ok := gpus[want][r.Device]
			if !ok {
				t.Errorf("claim's GPU %s is not one of %s's", r.Device, want)
			}
			roots[g.PCIeRoot]++
		case dra.DriverName:
			nic = r.Device
		}
	}
	if wantNIC := "vf-" + strings.NewReplacer(":", "-", ".", "-").Replace(vf); nic != wantNIC {
		t.Errorf("claim's NIC %s, net1's VF %s", nic, vf)
	}
	if len(roots) != 1 || roots[nicRoot[nic]] != 4 {
		t.Errorf("claim's GPUs under roots %v, its NIC %s under %s: want all 4 GPUs under the NIC's root", roots, nic, nicRoot[nic])
	}
	t.Logf("claim %s on %s: 4 GPUs and VF %s under %s", c.Name, want, vf, nicRoot[nic])
}
