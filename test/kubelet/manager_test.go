package kubelet

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"

	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

// setup gives a test a private kubelet device-plugin dir and its logs.
func setup(t *testing.T) {
	t.Helper()
	freshPluginDir(t)
	captureLogs(t)
}

// allocatable returns the healthy device IDs kubelet knows for res, with
// the NUMA nodes the plugin reported for each.
func allocatable(k *kubelet, res string) map[string][]int64 {
	out := map[string][]int64{}
	for id, d := range k.DM.GetAllocatableDevices(logger)[res] {
		numa := []int64{}
		if d.Topology != nil {
			for _, n := range d.Topology.Nodes {
				numa = append(numa, n.ID)
			}
		}
		out[id] = numa
	}
	return out
}

// TestRegistration: the agent registers each advertised pool with kubelet's
// real registration server, kubelet dials back, reads the options and the
// ListAndWatch device list, and the node's capacity shows the pool. Which
// pool is advertised depends on the RDMA netns mode, with both example
// configs loaded unchanged.
func TestRegistration(t *testing.T) {
	tests := []struct {
		name      string
		netnsMode string
		want      string // the advertised resource
		count     int64
		absent    string // the pool the netns mode rules out
	}{
		{name: "exclusive mode advertises the SR-IOV VF pool", netnsMode: "exclusive", want: sriovResource, count: 16, absent: sharedResource},
		{name: "shared mode advertises the shared HCA pool", netnsMode: "shared", want: sharedResource, count: 63, absent: sriovResource},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			setup(t)
			k := startKubelet(t, newPodSource(), kubeletOptions{})
			n := startNode(t, nodeOptions{Configs: []string{sriovConfig, sharedConfig}, NetnsMode: tc.netnsMode})
			k.waitCapacity(tc.want, tc.count, tc.count)

			capacity, _, _ := k.DM.GetCapacity(logger)
			if _, ok := capacity[v1.ResourceName(tc.absent)]; ok {
				t.Errorf("%s is in kubelet's capacity although the RDMA netns mode is %s", tc.absent, tc.netnsMode)
			}
			devs := allocatable(k, tc.want)
			switch tc.want {
			case sriovResource:
				// One device per VF, ID = PCI address, NUMA node of the PF.
				want := map[string][]int64{}
				for i := 0; i < 16; i++ {
					want[vfBDF(n.RoCE, i)] = []int64{int64(n.RoCE.NUMA)}
				}
				if !reflect.DeepEqual(devs, want) {
					t.Errorf("kubelet's devices = %v\nwant the 16 VFs of %s on NUMA %d: %v", devs, n.RoCE.Netdev, n.RoCE.NUMA, want)
				}
			case sharedResource:
				for id, numa := range devs {
					if !reflect.DeepEqual(numa, []int64{int64(n.Shared.NUMA)}) {
						t.Errorf("slot %s NUMA = %v, want the HCA's node %d", id, numa, n.Shared.NUMA)
					}
				}
			}
		})
	}
}

// TestAllocateThroughKubelet admits pods the way kubelet does (the
// topology manager's admit handler calls the device manager's Allocate,
// which calls the plugin), then asks the device manager for the container's
// run options, as kubelet does before creating the container.
func TestAllocateThroughKubelet(t *testing.T) {
	tests := []struct {
		name      string
		netnsMode string
		resource  string
		count     int64
		// want computes the expected device nodes and PCIDEVICE_ value
		// from the fixture, given the device IDs kubelet allocated.
		want func(t *testing.T, n *node, ids []string) (devs []string, pcidevice string)
	}{
		{
			name: "exclusive VF: its verbs/mad nodes, rdma_cm, PCIDEVICE_ env, device-info file", netnsMode: "exclusive", resource: sriovResource, count: 16,
			want: func(t *testing.T, n *node, ids []string) ([]string, string) {
				return append(n.charDevs(t, ids[0]), "/dev/infiniband/rdma_cm"), ids[0]
			},
		},
		{
			name: "shared slot: every selected HCA's nodes and rdma_cm, no PCI env", netnsMode: "shared", resource: sharedResource, count: 63,
			want: func(t *testing.T, n *node, ids []string) ([]string, string) {
				return append(n.charDevs(t, n.Shared.BDF), "/dev/infiniband/rdma_cm"), ""
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			setup(t)
			pods := newPodSource()
			k := startKubelet(t, pods, kubeletOptions{})
			n := startNode(t, nodeOptions{Configs: []string{sriovConfig, sharedConfig}, NetnsMode: tc.netnsMode})
			k.waitCapacity(tc.resource, tc.count, tc.count)

			pod := newPod("worker-0", tc.resource, 1)
			k.mustAdmit(pod)
			ids := k.devices(pod, tc.resource)
			if len(ids) != 1 {
				t.Fatalf("kubelet allocated %v, want one device", ids)
			}
			opts := k.runOptions(pod)
			wantDevs, wantPCI := tc.want(t, n, ids)
			sort.Strings(wantDevs)
			if got := hostPaths(t, opts); !reflect.DeepEqual(got, wantDevs) {
				t.Errorf("container device nodes = %v\nwant %v", got, wantDevs)
			}
			envName := "PCIDEVICE_EXAMPLE_COM_SRIOV_RDMA"
			got, ok := env(opts, envName)
			switch {
			case wantPCI == "" && ok:
				t.Errorf("%s=%q set for a shared slot", envName, got)
			case wantPCI != "" && got != wantPCI:
				t.Errorf("%s = %q (set %v), want %q", envName, got, ok, wantPCI)
			}
			if wantPCI == "" {
				return
			}
			// The NPWG device-info file the CNI side reads, at the upstream path.
			p := filepath.Join(n.DevInfoDir, "example.com-sriov_rdma-"+wantPCI+"-device.json")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatalf("device-info file: %v", err)
			}
			var info struct {
				Type string `json:"type"`
				PCI  struct {
					Address string `json:"pci-address"`
					PF      string `json:"pf-pci-address"`
					RDMA    string `json:"rdma-device"`
				} `json:"pci"`
			}
			if err := json.Unmarshal(b, &info); err != nil {
				t.Fatalf("device-info %s: %v", p, err)
			}
			if info.Type != "pci" || info.PCI.Address != wantPCI || info.PCI.PF != n.RoCE.BDF || info.PCI.RDMA != n.RDMAByBD[wantPCI] {
				t.Errorf("device-info %s = %s, want pci %s, PF %s, RDMA %s", p, b, wantPCI, n.RoCE.BDF, n.RDMAByBD[wantPCI])
			}
		})
	}
}

// TestKubeletAccountsEveryVF: kubelet hands out each VF once and refuses a
// pod when the pool is exhausted.
func TestKubeletAccountsEveryVF(t *testing.T) {
	setup(t)
	k := startKubelet(t, newPodSource(), kubeletOptions{})
	startNode(t, nodeOptions{})
	k.waitCapacity(sriovResource, 16, 16)

	seen := map[string]string{}
	for i := 0; i < 4; i++ {
		pod := newPod(fmt.Sprintf("worker-%d", i), sriovResource, 4)
		k.mustAdmit(pod)
		ids := k.devices(pod, sriovResource)
		if len(ids) != 4 {
			t.Fatalf("%s got %v, want 4 VFs", pod.Name, ids)
		}
		vfs, _ := env(k.runOptions(pod), "PCIDEVICE_EXAMPLE_COM_SRIOV_RDMA")
		gotEnv := strings.Split(vfs, ",")
		sort.Strings(gotEnv)
		if !reflect.DeepEqual(gotEnv, ids) {
			t.Errorf("%s: PCIDEVICE_ = %q, want the allocated VFs %v", pod.Name, vfs, ids)
		}
		for _, id := range ids {
			if prev, ok := seen[id]; ok {
				t.Errorf("VF %s given to %s and %s", id, prev, pod.Name)
			}
			seen[id] = pod.Name
		}
	}
	if r := k.admit(newPod("one-too-many", sriovResource, 1)); r.Admit {
		t.Errorf("kubelet admitted a 17th VF user")
	} else if !strings.Contains(r.Message, "Available: 0") {
		t.Errorf("refusal = %s: %s, want the device manager's 'unavailable' error", r.Reason, r.Message)
	}
}

// TestPreferredAllocation: for a multi-VF request kubelet's device manager
// asks the plugin's GetPreferredAllocation, and the pod's VFs come from one
// PF. The pool spans the 16-VF RoCE PF (NUMA 0) and a 2-VF InfiniBand PF
// (NUMA 1).
func TestPreferredAllocation(t *testing.T) {
	const twoPFs = `{"resourceList":[{"resourcePrefix":"example.com","resourceName":"sriov_rdma",
	  "selectors":[{"vendors":["15b3"],"pfNames":["enp65s0f0np0","ibp193s0f0"],"isRdma":true}]}]}`
	tests := []struct {
		name   string
		policy string
		// exact: the allocations the plugin prefers, in admission order.
		// Without a preference kubelet takes VFs in map order, so these
		// exact sets come only from GetPreferredAllocation.
		exact bool
	}{
		{name: "topology policy none: the plugin's preference decides", policy: topologymanager.PolicyNone, exact: true},
		{name: "topology policy single-numa-node: the plugin chooses within the NUMA hint", policy: topologymanager.PolicySingleNumaNode},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			setup(t)
			k := startKubelet(t, newPodSource(), kubeletOptions{Policy: tc.policy})
			n := startNode(t, nodeOptions{Configs: []string{writeConfig(t, twoPFs)}, Fixture: sysfsfixture.StandardOptions{IBVFs: 2}})
			k.waitCapacity(sriovResource, 18, 18)
			pfOf := map[string]sysfsfixture.Function{}
			for i := 0; i < 16; i++ {
				pfOf[vfBDF(n.RoCE, i)] = n.RoCE
			}
			for i := 0; i < 2; i++ {
				pfOf[vfBDF(n.IB, i)] = n.IB
			}
			want := [][]string{
				{vfBDF(n.IB, 0), vfBDF(n.IB, 1)},                       // best fit: the PF with exactly 2 free
				{vfBDF(n.RoCE, 0), vfBDF(n.RoCE, 1)},                   // then the lowest VFs of the other PF
				{vfBDF(n.RoCE, 2), vfBDF(n.RoCE, 3), vfBDF(n.RoCE, 4)}, // 3 VFs, still one PF
			}
			for i, w := range want {
				pod := newPod(fmt.Sprintf("ranks-%d", i), sriovResource, int64(len(w)))
				k.mustAdmit(pod)
				ids := k.devices(pod, sriovResource)
				pfs := map[string]bool{}
				numa := map[int]bool{}
				for _, id := range ids {
					pfs[pfOf[id].BDF] = true
					numa[pfOf[id].NUMA] = true
				}
				if len(ids) != len(w) || len(pfs) != 1 {
					t.Errorf("%s: VFs %v span PFs %v, want %d VFs of one PF", pod.Name, ids, pfs, len(w))
				}
				if len(numa) != 1 {
					t.Errorf("%s: VFs %v span NUMA nodes %v", pod.Name, ids, numa)
				}
				if tc.exact && !reflect.DeepEqual(ids, w) {
					t.Errorf("%s: kubelet allocated %v, want the plugin's preferred %v", pod.Name, ids, w)
				}
			}
		})
	}
}

// TestHealthSeenByKubelet: a device fault on the fixture node turns the
// affected devices Unhealthy in kubelet's device manager (allocatable
// drops, capacity stays), and recovery brings them back, with no restart.
func TestHealthSeenByKubelet(t *testing.T) {
	tests := []struct {
		name string
		// fault breaks the fixture node and returns the repair.
		fault         func(n *node) (heal func() error, err error)
		unhealthy     func(n *node) []string
		refusesNewPod bool
	}{
		{
			name: "PF link down takes every VF of the PF",
			fault: func(n *node) (func() error, error) {
				return func() error { return n.SetOperState(n.RoCE.Netdev, "up") }, n.SetOperState(n.RoCE.Netdev, "down")
			},
			unhealthy: func(n *node) []string {
				var out []string
				for i := 0; i < 16; i++ {
					out = append(out, vfBDF(n.RoCE, i))
				}
				return out
			},
			refusesNewPod: true,
		},
		{
			name: "VF RDMA device disappears",
			fault: func(n *node) (func() error, error) {
				vf := vfBDF(n.RoCE, 3)
				ib := n.RDMAByBD[vf]
				return func() error { return n.RestoreRDMA(vf, ib, sysfsfixture.Ethernet) }, n.RemoveRDMA(vf)
			},
			unhealthy: func(n *node) []string { return []string{vfBDF(n.RoCE, 3)} },
		},
		{
			name: "VF RDMA port goes DOWN",
			fault: func(n *node) (func() error, error) {
				ib := n.RDMAByBD[vfBDF(n.RoCE, 5)]
				return func() error { return n.SetPortState(ib, "4: ACTIVE") }, n.SetPortState(ib, "1: DOWN")
			},
			unhealthy: func(n *node) []string { return []string{vfBDF(n.RoCE, 5)} },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			setup(t)
			k := startKubelet(t, newPodSource(), kubeletOptions{})
			n := startNode(t, nodeOptions{})
			k.waitCapacity(sriovResource, 16, 16)

			bad := tc.unhealthy(n)
			heal, err := tc.fault(n)
			if err != nil {
				t.Fatal(err)
			}
			k.waitCapacity(sriovResource, 16, int64(16-len(bad)))
			devs := allocatable(k, sriovResource)
			for _, id := range bad {
				if _, ok := devs[id]; ok {
					t.Errorf("%s is still allocatable in kubelet after the fault", id)
				}
			}
			if tc.refusesNewPod {
				if r := k.admit(newPod("during-fault", sriovResource, 1)); r.Admit {
					t.Errorf("kubelet admitted a pod while every VF is unhealthy")
				}
			}

			if err := heal(); err != nil {
				t.Fatal(err)
			}
			k.waitCapacity(sriovResource, 16, 16)
			k.mustAdmit(newPod("after-recovery", sriovResource, 1))
		})
	}
}

// TestPoolMembershipSeenByKubelet: VFs appearing and vanishing on the
// node (sriov_numvfs changed) and a narrower pool configuration change the
// devices kubelet holds for the pool, without restarting the agent.
func TestPoolMembershipSeenByKubelet(t *testing.T) {
	setup(t)
	k := startKubelet(t, newPodSource(), kubeletOptions{})
	seed, err := os.ReadFile(sriovConfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, string(seed))
	n := startNode(t, nodeOptions{Configs: []string{cfg}})
	k.waitCapacity(sriovResource, 16, 16)
	vfs := func(idx ...int) map[string][]int64 {
		out := map[string][]int64{}
		for _, i := range idx {
			out[vfBDF(n.RoCE, i)] = []int64{int64(n.RoCE.NUMA)}
		}
		return out
	}
	span := func(lo, hi int) []int {
		var out []int
		for i := lo; i < hi; i++ {
			out = append(out, i)
		}
		return out
	}
	steps := []struct {
		name   string
		change func() error
		want   map[string][]int64
	}{
		{name: "sriov_numvfs 16 -> 8", change: func() error { return n.SetNumVFs(n.RoCE, 16, 8) }, want: vfs(span(0, 8)...)},
		{name: "sriov_numvfs 8 -> 12", change: func() error { return n.SetNumVFs(n.RoCE, 8, 12) }, want: vfs(span(0, 12)...)},
		{
			name: "config narrowed to VFs 0-3,7 with a pfNames range",
			change: func() error {
				return os.WriteFile(cfg, []byte(strings.Replace(string(seed), `"enp65s0f0np0"`, `"enp65s0f0np0#0-3,7"`, 1)), 0o644)
			},
			want: vfs(0, 1, 2, 3, 7),
		},
	}
	for _, s := range steps {
		if err := s.change(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		k.waitCapacity(sriovResource, int64(len(s.want)), int64(len(s.want)))
		if got := allocatable(k, sriovResource); !reflect.DeepEqual(got, s.want) {
			t.Errorf("%s: kubelet's devices = %v, want %v", s.name, got, s.want)
		}
	}
}

// TestAgentRestart: when the agent stops (DaemonSet rollout), kubelet sees
// the plugin go and keeps the resource with no allocatable device; the new
// agent registers again, and the running pod's allocation is untouched.
func TestAgentRestart(t *testing.T) {
	setup(t)
	k := startKubelet(t, newPodSource(), kubeletOptions{})
	n := startNode(t, nodeOptions{})
	k.waitCapacity(sriovResource, 16, 16)
	pod := newPod("survivor", sriovResource, 2)
	k.mustAdmit(pod)
	held := k.devices(pod, sriovResource)

	n.stopAgent()
	// kubelet keeps the capacity during its grace period but nothing is allocatable.
	k.waitCapacity(sriovResource, 16, 0)
	if r := k.admit(newPod("while-agent-down", sriovResource, 1)); r.Admit {
		t.Errorf("kubelet admitted a pod while the plugin was gone")
	}

	n.startAgent(t)
	k.waitCapacity(sriovResource, 16, 16)
	if got := k.devices(pod, sriovResource); !reflect.DeepEqual(got, held) {
		t.Errorf("pod's VFs after the agent restart = %v, want %v", got, held)
	}
	rest := newPod("after", sriovResource, 14)
	k.mustAdmit(rest)
	for _, id := range k.devices(rest, sriovResource) {
		if id == held[0] || id == held[1] {
			t.Errorf("VF %s given to %s while %s holds it", id, rest.Name, pod.Name)
		}
	}
}

// TestKubeletRestart: kubelet stops and a new kubelet starts on the same
// directory (removing every plugin socket, as kubelet does). The agent
// serves again and re-registers, capacity is back, and the new kubelet
// still knows the running pod's VF from its checkpoint: the pod keeps it
// and nobody else gets it.
func TestKubeletRestart(t *testing.T) {
	setup(t)
	pods := newPodSource()
	k1 := startKubelet(t, pods, kubeletOptions{})
	startNode(t, nodeOptions{})
	k1.waitCapacity(sriovResource, 16, 16)
	pod := newPod("long-running", sriovResource, 1)
	k1.mustAdmit(pod)
	held := k1.devices(pod, sriovResource)
	before := k1.runOptions(pod)
	sock := filepath.Join(pluginDir, "rdmanet-example_com_sriov_rdma.sock")
	oldIno := inode(t, sock)

	k1.Stop()
	// The pod's container keeps running while kubelet is down.
	containers := containermap.NewContainerMap()
	containers.Add(string(pod.UID), pod.Spec.Containers[0].Name, "containerd://c0ffee")
	pods.ready.Store(false) // a restarted kubelet has not heard from its sources yet
	k2 := startKubelet(t, pods, kubeletOptions{Containers: containers, Running: sets.New("containerd://c0ffee")})

	// kubelet re-admits the pods it finds; a running container keeps its devices.
	k2.mustAdmit(pod)
	if got := k2.devices(pod, sriovResource); !reflect.DeepEqual(got, held) {
		t.Errorf("after restart kubelet holds %v for the pod, want %v (from the checkpoint)", got, held)
	}
	k2.waitCapacity(sriovResource, 16, 16)
	if ino := inode(t, sock); ino == oldIno {
		t.Errorf("plugin socket %s has the same inode after kubelet removed it; the agent did not serve again", sock)
	}
	pods.ready.Store(true)

	after := k2.runOptions(pod)
	if !reflect.DeepEqual(hostPaths(t, after), hostPaths(t, before)) || !reflect.DeepEqual(after.Envs, before.Envs) {
		t.Errorf("run options changed across the restart:\nbefore %+v\nafter  %+v", before, after)
	}
	if r := k2.admit(newPod("wants-all", sriovResource, 16)); r.Admit {
		t.Errorf("new kubelet gave out all 16 VFs while %v is held by a running pod", held)
	}
	rest := newPod("takes-the-rest", sriovResource, 15)
	k2.mustAdmit(rest)
	for _, id := range k2.devices(rest, sriovResource) {
		if id == held[0] {
			t.Errorf("VF %s given to %s while %s holds it", id, rest.Name, pod.Name)
		}
	}
}

// inode waits for path to exist and returns its inode number.
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	deadline := time.Now().Add(pollDeadline)
	for {
		var st syscall.Stat_t
		err := syscall.Stat(path, &st)
		if err == nil {
			return st.Ino
		}
		if time.Now().After(deadline) {
			t.Fatalf("socket %s: %v", path, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
