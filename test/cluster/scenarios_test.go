//go:build clustertest

package cluster_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/rdmanet/rdmanet/test/cluster"
)

const (
	vfResource     = "example.com/sriov_rdma"
	sharedResource = "rdma/rdma_shared_device_eth"
	exclusiveNS    = "ai-training"
	exclusiveSel   = "app=face-trainer"
)

// The scenarios run in this order on one node; each leaves the node clean
// for the next.
func TestCluster(t *testing.T) {
	t.Run("rdmanet installed", testInstalled)
	t.Run("exclusive seed job", testExclusiveSeed)
	t.Run("pods deleted: VFs and addresses back", testDeleteReleases)
	t.Run("seed exclusive job through DRA", testDRA)
	t.Run("seed exclusive job unchanged on a DRA-only node", testDRAOnly)
	t.Run("DRA claims across agent and kubelet restarts", testDRARestart)
	t.Run("DRA: GPU and VF aligned by PCIe root", testDRAAligned)
	t.Run("hostNetwork seed pod", testHostNetwork)
	t.Run("own namespace and NAD over the seed resource", testOtherWorkload)
	t.Run("kubelet restart with pods running", func(t *testing.T) { testRestart(t, "kubelet") })
	t.Run("containerd restart with pods running", func(t *testing.T) { testRestart(t, "containerd") })
	t.Run("daemonset rolled to a new image tag", testRoll)
	t.Run("shared mode", testShared)
	t.Run("shared seed job unchanged on a DRA-only node", testSharedDRAOnly)
	t.Run("rdmanet-controller: webhooks, node label, verify", testController)
	t.Run("fault soak", testSoak)
	t.Run("kubectl delete -k leaves nothing", testUninstall)
	t.Run("helm install runs the seeds' workloads, helm uninstall leaves nothing", testHelm)
}

func testInstalled(t *testing.T) {
	ps := waitRunning(t, "rdmanet-system", "app.kubernetes.io/name=rdmanet-node", 1, 3*time.Minute)
	// rdmanet-controller's two replicas (leader election; both serve the
	// webhooks), ready before the install step returned.
	waitRunning(t, "rdmanet-system", "app.kubernetes.io/name=rdmanet-controller", 2, time.Minute)
	for _, c := range ps[0].Status.ContainerStatuses {
		if !c.Ready {
			t.Errorf("rdmanet-node container %s not Ready", c.Name)
		}
	}
	// The install step put rdmanet first in the node's CNI config dir, with
	// the bridge network as its cluster network.
	conf := filepath.Join(layout.Dir, "node/etc/cni/net.d/00-rdmanet.conf")
	b, err := os.ReadFile(conf)
	if err != nil {
		t.Fatalf("install step: %v", err)
	}
	if !strings.Contains(string(b), `"clusterNetwork": "`+cluster.ClusterNetwork+`"`) {
		t.Errorf("%s: clusterNetwork is not %s:\n%s", conf, cluster.ClusterNetwork, b)
	}
	for _, bin := range []string{"rdmanet", "rdmanet-direct", "sriov", "sriov-direct", "rdma", "rdma-direct", "rdmanet-ipam", "rdmanet-ipam-direct"} {
		if _, err := os.Stat(filepath.Join(layout.Dir, "node/opt/cni/bin", bin)); err != nil {
			t.Errorf("install step: CNI binary %s: %v", bin, err)
		}
	}
	// The agent registered its pools with the real kubelet, which reports
	// them in the node's status at its next status update (every 10 s by
	// default): wait for it rather than read once.
	for _, r := range []string{vfResource, "nvidia.com/gpu"} {
		var alloc string
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
			alloc = kubectl(t, "get", "node", cluster.NodeName, "-o", `jsonpath={.status.allocatable}`)
			if strings.Contains(alloc, `"`+r+`"`) || time.Now().After(deadline) {
				break
			}
		}
		if !strings.Contains(alloc, `"`+r+`"`) {
			t.Errorf("node allocatable %s lacks %s a minute after the agent's pod is Ready", alloc, r)
		}
	}
}

// applyExample creates ns (when missing) and applies files; both are
// removed when the test ends, passed or failed, so a failure does not hold
// VFs, GPUs or addresses the next scenario needs.
func applyExample(t *testing.T, ns string, files ...string) {
	t.Helper()
	if ns != "" {
		if _, err := k.Output(ctx(t, time.Minute), "get", "ns", ns); err != nil {
			kubectl(t, "create", "ns", ns)
			if ns != exclusiveNS {
				cleanupNamespace(t, ns)
			}
		}
	}
	for _, f := range files {
		kubectl(t, "apply", "-f", repoPath(f))
	}
	t.Cleanup(func() {
		for i := len(files) - 1; i >= 0; i-- {
			_, _ = k.Output(context.Background(), "delete", "--ignore-not-found", "--wait", "--timeout=180s", "-f", repoPath(files[i]))
		}
	})
}

// cleanupNamespace deletes ns when the test ends.
func cleanupNamespace(t *testing.T, ns string) {
	t.Cleanup(func() {
		_, _ = k.Output(context.Background(), "delete", "ns", ns, "--ignore-not-found", "--wait", "--timeout=300s")
	})
}

func deleteExample(t *testing.T, files ...string) {
	t.Helper()
	for i := len(files) - 1; i >= 0; i-- {
		kubectl(t, "delete", "--ignore-not-found", "--wait", "--timeout=180s", "-f", repoPath(files[i]))
	}
}

var exclusiveFiles = []string{"examples/cluster/exclusive/nad.yaml", "examples/cluster/exclusive/job.yaml"}

// checkExclusive asserts what an exclusive pod must have: net1 with the
// address its network-status names, device-info with the VF's PCI address
// and RDMA device, and the VF among the devices the real kubelet allocated
// to the pod (PodResources; res nil: not compared).
func checkExclusive(t *testing.T, ns, pod string, res map[string]map[string][]string) (vf, ip string) {
	t.Helper()
	st := find(waitNetworkStatus(t, ns, pod), "net1")
	if st == nil {
		t.Fatalf("%s/%s: network-status has no net1", ns, pod)
	}
	if len(st.IPs) == 0 {
		t.Fatalf("%s/%s: net1 has no address in network-status", ns, pod)
	}
	got := ipv4Of(t, ns, pod, "net1")
	var want []string
	for _, ip := range st.IPs {
		if strings.Contains(ip, ".") {
			want = append(want, ip)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s/%s: ip addr show net1 = %v, network-status says %v", ns, pod, got, want)
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, w+"/") }) {
			t.Errorf("%s/%s: net1 lacks %s (has %v)", ns, pod, w, got)
		}
	}
	if st.DeviceInfo == nil || st.DeviceInfo.PCI == nil || st.DeviceInfo.PCI.PCIAddress == "" || st.DeviceInfo.PCI.RDMADevice == "" {
		t.Fatalf("%s/%s: net1 device-info lacks the VF's PCI address or RDMA device: %+v", ns, pod, st.DeviceInfo)
	}
	vf = st.DeviceInfo.PCI.PCIAddress
	if devs := res[ns+"/"+pod][vfResource]; res != nil && !slices.Contains(devs, vf) {
		t.Errorf("%s/%s: VF %s on net1 is not what kubelet allocated to the pod (PodResources %s: %v)", ns, pod, vf, vfResource, devs)
	}
	return vf, want[0]
}

func testExclusiveSeed(t *testing.T) {
	applyExample(t, exclusiveNS, exclusiveFiles...)
	ps := waitRunning(t, exclusiveNS, exclusiveSel, 2, 4*time.Minute)
	res := podResources(t)
	vfs, ips := map[string]string{}, map[string]string{}
	for _, p := range ps {
		vf, ip := checkExclusive(t, exclusiveNS, p.Name, res)
		if other, dup := vfs[vf]; dup {
			t.Errorf("VF %s in two pods: %s and %s", vf, other, p.Name)
		}
		if other, dup := ips[ip]; dup {
			t.Errorf("address %s in two pods: %s and %s", ip, other, p.Name)
		}
		vfs[vf], ips[ip] = p.Name, p.Name
		if _, in := net.ParseIP(ip), strings.HasPrefix(ip, "10.60."); !in || strings.HasPrefix(ip, "10.60.0.") {
			t.Errorf("%s: address %s is not in the seed's 10.60.0.0/16 minus 10.60.0.0/24", p.Name, ip)
		}
		if gpus := res[exclusiveNS+"/"+p.Name]["nvidia.com/gpu"]; len(gpus) != 8 {
			t.Errorf("%s: kubelet allocated %d GPUs, the seed asks 8", p.Name, len(gpus))
		}
	}
	t.Logf("exclusive pods: VFs %v, addresses %v", vfs, ips)
}

func testDeleteReleases(t *testing.T) {
	before := ipamAllocations(t)
	if len(before) == 0 {
		t.Fatal("no IPAM allocation before delete: the exclusive job did not allocate through the kubernetes store")
	}
	deleteExample(t, exclusiveFiles...)
	waitGone(t, exclusiveNS, exclusiveSel, 3*time.Minute)
	deadline := time.Now().Add(60 * time.Second)
	for {
		left := ipamAllocations(t)
		var held []string
		for ip, pod := range left {
			if strings.HasPrefix(pod, exclusiveNS+"/") {
				held = append(held, ip+" "+pod)
			}
		}
		if len(held) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("addresses still held after the pods were deleted: %v", held)
		}
		time.Sleep(time.Second)
	}
	for pod, r := range podResources(t) {
		if strings.HasPrefix(pod, exclusiveNS+"/") && len(r[vfResource]) > 0 {
			t.Errorf("kubelet still reports VFs for deleted pod %s: %v", pod, r[vfResource])
		}
	}
	// Every VF is usable again: as many pods as VFs, all Running.
	n := cluster.NumVFs
	applyExample(t, "vf-fill")
	if err := k.Apply(ctx(t, time.Minute), vfFill("vf-fill", n)); err != nil {
		t.Fatal(err)
	}
	ps := waitRunning(t, "vf-fill", "app=vf-fill", n, 5*time.Minute)
	res := podResources(t)
	seen := map[string]bool{}
	for _, p := range ps {
		vf, _ := checkExclusive(t, "vf-fill", p.Name, res)
		seen[vf] = true
	}
	if len(seen) != n {
		t.Errorf("%d pods got %d distinct VFs, want %d", n, len(seen), n)
	}
	kubectl(t, "delete", "ns", "vf-fill", "--wait", "--timeout=300s")
}

// vfFill is n pods, each with one VF through the seed's NAD (copied into ns).
func vfFill(ns string, n int) string {
	nad, _ := os.ReadFile(repoPath("examples/cluster/exclusive/nad.yaml"))
	var b strings.Builder
	b.WriteString(strings.ReplaceAll(string(nad), "namespace: "+exclusiveNS, "namespace: "+ns))
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `
---
apiVersion: v1
kind: Pod
metadata:
  name: vf-%d
  namespace: %s
  labels: {app: %s}
  annotations:
    k8s.v1.cni.cncf.io/networks: '[{"name": "face-training-rdma", "interface": "net1"}]'
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: c
      image: %s
      imagePullPolicy: Never
      command: ["sleep", "infinity"]
      resources:
        limits: {%s: "1"}
`, i, ns, ns, cluster.TestboxImage, vfResource)
	}
	return b.String()
}

var hostFiles = []string{"examples/cluster/hostnetwork/service.yaml", "examples/cluster/hostnetwork/pod.yaml"}

func testHostNetwork(t *testing.T) {
	applyExample(t, "", hostFiles...)
	ps := waitRunning(t, "default", "job-name=my-training-job", 1, 3*time.Minute)
	out, err := execIn(t, "default", ps[0].Name, "ip", "-o", "link", "show")
	if err != nil {
		t.Fatal(err)
	}
	if hasLink(out, "net1") {
		t.Errorf("hostNetwork pod has a net1:\n%s", out)
	}
	if !hasLink(out, cluster.UplinkDev) {
		t.Errorf("hostNetwork pod does not see the node's %s:\n%s", cluster.UplinkDev, out)
	}
	deleteExample(t, hostFiles...)
}

// testOtherWorkload: a workload written by someone else, in its own
// namespace with its own NAD over the seed's resource name.
func testOtherWorkload(t *testing.T) {
	const ns = "team-vision"
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: vision-rdma
  namespace: %[1]s
  annotations: {k8s.v1.cni.cncf.io/resourceName: %[2]s}
spec:
  config: '{"cniVersion": "1.0.0", "name": "vision-rdma", "plugins": [{"type": "sriov", "ipam": {"type": "whereabouts", "range": "10.70.0.0/24", "range_start": "10.70.0.10"}}, {"type": "rdma"}]}'
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: vision, namespace: %[1]s}
spec:
  replicas: 2
  selector: {matchLabels: {app: vision}}
  template:
    metadata:
      labels: {app: vision}
      annotations: {k8s.v1.cni.cncf.io/networks: vision-rdma}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: worker
          image: %[3]s
          imagePullPolicy: Never
          command: ["sh", "-c", "while true; do sleep 3600; done"]
          securityContext: {capabilities: {add: [IPC_LOCK]}}
          resources: {limits: {%[2]s: "1"}}
`, ns, vfResource, cluster.TestboxImage)
	cleanupNamespace(t, ns)
	if err := k.Apply(ctx(t, time.Minute), manifest); err != nil {
		t.Fatal(err)
	}
	ps := waitRunning(t, ns, "app=vision", 2, 3*time.Minute)
	res := podResources(t)
	for _, p := range ps {
		_, ip := checkExclusive(t, ns, p.Name, res)
		if !strings.HasPrefix(ip, "10.70.0.") {
			t.Errorf("%s: address %s not from its own NAD's range", p.Name, ip)
		}
	}
	kubectl(t, "delete", "ns", ns, "--wait", "--timeout=300s")
}

// testRestart restarts kubelet or containerd with pods running: the pods
// keep their containers and net1, kubelet's pools are registered again,
// and a new pod attaches.
func testRestart(t *testing.T, component string) {
	ns := "restart-" + component
	applyExample(t, ns)
	if err := k.Apply(ctx(t, time.Minute), vfFill(ns, 2)); err != nil {
		t.Fatal(err)
	}
	ps := waitRunning(t, ns, "app="+ns, 2, 3*time.Minute)
	type seen struct{ uid, ip, cid string }
	before := map[string]seen{}
	res := podResources(t)
	for _, p := range ps {
		_, ip := checkExclusive(t, ns, p.Name, res)
		before[p.Name] = seen{string(p.UID), ip, p.Status.ContainerStatuses[0].ContainerID}
	}
	if err := cluster.NewControl(layout).Restart(ctx(t, 5*time.Minute), component); err != nil {
		t.Fatalf("restart %s: %v", component, err)
	}
	kubectl(t, "wait", "--for=condition=Ready", "node/"+cluster.NodeName, "--timeout=180s")
	// Pools registered again: the allocatable VF count comes back.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		a := kubectl(t, "get", "node", cluster.NodeName, "-o", `jsonpath={.status.allocatable.example\.com/sriov_rdma}`)
		if trim(a) == fmt.Sprint(cluster.NumVFs) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s restart: allocatable %s = %q, want %d", component, vfResource, a, cluster.NumVFs)
		}
		time.Sleep(time.Second)
	}
	for _, p := range waitRunning(t, ns, "app="+ns, 2, 2*time.Minute) {
		b := before[p.Name]
		if string(p.UID) != b.uid || p.Status.ContainerStatuses[0].ContainerID != b.cid || p.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Errorf("%s: pod or container changed across the %s restart", p.Name, component)
		}
		if got := ipv4Of(t, ns, p.Name, "net1"); len(got) == 0 || !strings.HasPrefix(got[0], b.ip+"/") {
			t.Errorf("%s: net1 = %v after %s restart, had %s", p.Name, got, component, b.ip)
		}
	}
	// A new pod attaches.
	more := strings.ReplaceAll(vfFill(ns, 3), "name: vf-0\n", "name: vf-x0\n")
	more = strings.ReplaceAll(more, "name: vf-1\n", "name: vf-x1\n")
	if err := k.Apply(ctx(t, time.Minute), more); err != nil {
		t.Fatal(err)
	}
	ps = waitRunning(t, ns, "app="+ns, 5, 3*time.Minute)
	res = podResources(t)
	for _, p := range ps {
		checkExclusive(t, ns, p.Name, res)
	}
	kubectl(t, "delete", "ns", ns, "--wait", "--timeout=300s")
}

// tagImage tags rdmanet's image in node n's containerd as <name>:tag and
// returns that reference: a new tag the DaemonSet can be rolled to.
func tagImage(t *testing.T, n cluster.Node, tag string) string {
	t.Helper()
	name, _, _ := strings.Cut(state.Image, ":")
	newRef := name + ":" + tag
	// containerd stores the image under its normalized (fully qualified)
	// name: tag that one.
	ctl := cluster.NewNodeControl(layout, n)
	ctr := []string{layout.Tools() + "/ctr", "--address", cluster.ContainerdSocket, "-n", "k8s.io"}
	refs, err := ctl.Exec(ctx(t, time.Minute), append(ctr, "images", "ls", "-q")...)
	if err != nil {
		t.Fatalf("%s: ctr images ls: %v\n%s", n.Name, err, refs)
	}
	var stored string
	for _, r := range strings.Fields(refs) {
		if r == state.Image || strings.HasSuffix(r, "/"+state.Image) {
			stored = r
		}
	}
	if stored == "" {
		t.Fatalf("%s: image %s not in containerd: %s", n.Name, state.Image, refs)
	}
	storedNew := strings.TrimSuffix(stored, state.Image) + newRef
	if out, err := ctl.Exec(ctx(t, time.Minute), append(ctr, "images", "tag", "--force", stored, storedNew)...); err != nil {
		t.Fatalf("%s: tag %s as %s: %v\n%s", n.Name, stored, storedNew, err, out)
	}
	return newRef
}

// testRoll rolls the rdmanet DaemonSet to a new image tag with pods
// running: the pods keep their networks, and their DEL works afterwards
// (the VFs come back).
func testRoll(t *testing.T) {
	const ns = "roll"
	applyExample(t, ns)
	if err := k.Apply(ctx(t, time.Minute), vfFill(ns, 2)); err != nil {
		t.Fatal(err)
	}
	ps := waitRunning(t, ns, "app="+ns, 2, 3*time.Minute)
	res := podResources(t)
	ips := map[string]string{}
	for _, p := range ps {
		_, ips[p.Name] = checkExclusive(t, ns, p.Name, res)
	}
	newRef := tagImage(t, state.Nodes[0], "rolled")
	oldPod := pods(t, "rdmanet-system", "app.kubernetes.io/name=rdmanet-node")[0].Name
	kubectl(t, "-n", "rdmanet-system", "set", "image", "daemonset/rdmanet-node", "*="+newRef)
	kubectl(t, "-n", "rdmanet-system", "rollout", "status", "daemonset/rdmanet-node", "--timeout=300s")
	np := pods(t, "rdmanet-system", "app.kubernetes.io/name=rdmanet-node")
	if len(np) != 1 || np[0].Name == oldPod || np[0].Spec.Containers[0].Image != newRef {
		t.Fatalf("daemonset not rolled to %s: pods %v", newRef, np)
	}
	for _, p := range waitRunning(t, ns, "app="+ns, 2, time.Minute) {
		if got := ipv4Of(t, ns, p.Name, "net1"); len(got) == 0 || !strings.HasPrefix(got[0], ips[p.Name]+"/") {
			t.Errorf("%s: net1 = %v after the roll, had %s", p.Name, got, ips[p.Name])
		}
	}
	kubectl(t, "delete", "ns", ns, "--wait", "--timeout=300s")
	for ip, pod := range ipamAllocations(t) {
		if strings.HasPrefix(pod, ns+"/") {
			t.Errorf("address %s still held by deleted %s after DEL on the rolled daemon", ip, pod)
		}
	}
	// All VFs usable again after DEL by the new daemon.
	applyExample(t, "roll-after")
	if err := k.Apply(ctx(t, time.Minute), vfFill("roll-after", cluster.NumVFs)); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, "roll-after", "app=roll-after", cluster.NumVFs, 5*time.Minute)
	kubectl(t, "delete", "ns", "roll-after", "--wait", "--timeout=300s")
}

var sharedFiles = []string{"examples/cluster/shared/nad.yaml", "examples/cluster/shared/job.yaml"}

// testShared switches the node's RDMA netns mode to shared (what `rdma
// system set netns shared` does on a real node; here the agent is told with
// --rdma-netns-mode), then runs the shared-mode pods: a macvlan net1 over
// the shared HCA's PF, the HCA's devices from the shared pool.
func testShared(t *testing.T) {
	switchToShared(t)
	applyExample(t, sharedNamespace(t), sharedFiles...)
	ns := sharedNamespace(t)
	ps := waitRunning(t, ns, "", sharedPods(t), 3*time.Minute)
	checkSharedNet1(t, ns, ps)
	deleteExample(t, sharedFiles...)
}

// checkSharedNet1: every pod's net1 is a macvlan over the shared HCA's PF
// with the address its network-status names.
func checkSharedNet1(t *testing.T, ns string, ps []corev1.Pod) {
	t.Helper()
	link, err := cluster.NewControl(layout).Exec(ctx(t, time.Minute), "ip", "-o", "link", "show", cluster.SharedPF)
	if err != nil {
		t.Fatalf("ip link show %s in the node: %v", cluster.SharedPF, err)
	}
	pfIndex, _, _ := strings.Cut(link, ":")
	for _, p := range ps {
		// busybox's ip has no -d, and sysfs does not name the link type: a
		// macvlan's iflink is its lower device's ifindex, so net1 must
		// point at the shared HCA's PF in the node.
		out, err := execIn(t, ns, p.Name, "cat", "/sys/class/net/net1/iflink")
		if err != nil {
			t.Fatal(err)
		}
		if trim(out) != pfIndex {
			t.Errorf("%s: net1's lower link is ifindex %s, want %s (%s, the shared HCA's PF)", p.Name, trim(out), pfIndex, cluster.SharedPF)
		}
		st := find(waitNetworkStatus(t, ns, p.Name), "net1")
		if st == nil || len(st.IPs) == 0 {
			t.Errorf("%s: network-status has no net1 address", p.Name)
		}
	}
}

// switchToShared puts the node in the RDMA shared netns mode (the
// simulated kernel's and the agent's flag, through a DaemonSet roll) until
// the shared HCA pool is allocatable; the cleanup puts it back in exclusive
// mode for what follows.
func switchToShared(t *testing.T) {
	t.Helper()
	if err := cluster.SetRDMANetnsMode(layout, "shared"); err != nil {
		t.Fatal(err)
	}
	ci, ai := agentModeArg(t)
	t.Cleanup(func() { // back to the node's exclusive mode for what follows
		if err := cluster.SetRDMANetnsMode(layout, "exclusive"); err != nil {
			t.Error(err)
		}
		_, _ = k.Output(context.Background(), "-n", "rdmanet-system", "patch", "daemonset", "rdmanet-node", "--type=json",
			"-p", fmt.Sprintf(`[{"op": "replace", "path": "/spec/template/spec/containers/%d/args/%d", "value": "--rdma-netns-mode=exclusive"}]`, ci, ai))
		_, _ = k.Output(context.Background(), "-n", "rdmanet-system", "rollout", "status", "daemonset/rdmanet-node", "--timeout=300s")
		// The agent's pod is Ready before kubelet reports its VF pool again;
		// a pod scheduled in between gets its VF through DRA's extended
		// resource class instead (seen in CI: the next scenario's pod).
		waitAllocatable(t, vfResource, fmt.Sprint(cluster.NumVFs))
	})
	kubectl(t, "-n", "rdmanet-system", "patch", "daemonset", "rdmanet-node", "--type=json",
		"-p", fmt.Sprintf(`[{"op": "replace", "path": "/spec/template/spec/containers/%d/args/%d", "value": "--rdma-netns-mode=shared"}]`, ci, ai))
	kubectl(t, "-n", "rdmanet-system", "rollout", "status", "daemonset/rdmanet-node", "--timeout=300s")
	deadline := time.Now().Add(2 * time.Minute)
	for {
		a := kubectl(t, "get", "node", cluster.NodeName, "-o", `jsonpath={.status.allocatable.rdma/rdma_shared_device_eth}`)
		if trim(a) != "" && trim(a) != "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("shared pool %s not allocatable after switching to shared mode", sharedResource)
		}
		time.Sleep(time.Second)
	}
}

// agentModeArg finds the agent container and its --rdma-netns-mode argument.
func agentModeArg(t *testing.T) (container, arg int) {
	names := strings.Fields(kubectl(t, "-n", "rdmanet-system", "get", "daemonset", "rdmanet-node", "-o", `jsonpath={.spec.template.spec.containers[*].name}`))
	for ci, n := range names {
		if n != "rdmanet-agent" {
			continue
		}
		args := strings.Fields(kubectl(t, "-n", "rdmanet-system", "get", "daemonset", "rdmanet-node", "-o",
			fmt.Sprintf(`jsonpath={.spec.template.spec.containers[%d].args[*]}`, ci)))
		for ai, a := range args {
			if strings.HasPrefix(a, "--rdma-netns-mode=") {
				return ci, ai
			}
		}
		t.Fatalf("agent args %v have no --rdma-netns-mode", args)
	}
	t.Fatalf("no rdmanet-agent container in %v", names)
	return 0, 0
}

// sharedNamespace and sharedPods read the runnable shared example.
func sharedNamespace(t *testing.T) string {
	b, err := os.ReadFile(repoPath(sharedFiles[1]))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "namespace:" {
			return f[1]
		}
	}
	return "default"
}

func sharedPods(t *testing.T) int {
	b, _ := os.ReadFile(repoPath(sharedFiles[1]))
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && (f[0] == "parallelism:" || f[0] == "replicas:") {
			var n int
			fmt.Sscan(strings.Trim(f[1], `"`), &n)
			return n
		}
	}
	return 1
}

// testUninstall: kubectl delete -k removes every rdmanet process and socket
// on the node; what stays is what docs/deploy.md names.
func testUninstall(t *testing.T) {
	if err := layout.Uninstall(ctx(t, 5*time.Minute), k, os.Stdout); err != nil {
		t.Fatal(err)
	}
	checkNothingLeft(t, "kubectl delete -k")
}

// testHelm installs rdmanet again, now from its Helm chart (charts/rdmanet
// with the simulated node's values, as docs/release.md says), runs the
// seed's exclusive Job on it (VFs, addresses, network-status as with the
// kustomize install), deletes it (VFs and addresses back), runs the
// hostNetwork seed and the shared seed Job, and uninstalls: `helm
// uninstall` leaves nothing of rdmanet on the node or in the API, as
// `kubectl delete -k` does. It runs after testUninstall, on a cluster with
// no rdmanet.
func testHelm(t *testing.T) {
	took, err := layout.HelmInstall(ctx(t, 10*time.Minute), k, state, os.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("helm install: %s, then the DaemonSet and controller rolled out", took.Round(time.Millisecond))
	if out := kubectl(t, "-n", cluster.HelmNamespace, "get", "daemonset", "rdmanet-node", "-o", `jsonpath={.metadata.labels.app\.kubernetes\.io/managed-by} {.metadata.annotations.meta\.helm\.sh/release-name}`); trim(out) != "Helm "+cluster.HelmRelease {
		t.Fatalf("rdmanet-node is not the Helm release's (managed-by, release-name: %q)", trim(out))
	}
	waitAllocatable(t, vfResource, fmt.Sprint(cluster.NumVFs))
	testExclusiveSeed(t)
	testDeleteReleases(t)
	// The other two seeds, each a subtest so that its cleanup (the shared
	// seed puts the node back in exclusive mode) runs before the uninstall.
	t.Run("hostNetwork seed pod", testHostNetwork)
	t.Run("shared seed job", testShared)
	if err := layout.HelmUninstall(ctx(t, 5*time.Minute), k, state, os.Stdout); err != nil {
		t.Fatal(err)
	}
	checkNothingLeft(t, "helm uninstall")
}

// checkNothingLeft: after an uninstall (how: its command), no rdmanet pod,
// webhook configuration, daemon socket, device plugin socket or process is
// left.
func checkNothingLeft(t *testing.T, how string) {
	t.Helper()
	waitGone(t, "rdmanet-system", "app.kubernetes.io/name=rdmanet-node", 2*time.Minute)
	waitGone(t, "rdmanet-system", "app.kubernetes.io/name=rdmanet-controller", 2*time.Minute)
	for _, kind := range []string{"mutatingwebhookconfiguration", "validatingwebhookconfiguration"} {
		if out, _ := k.Output(ctx(t, time.Minute), "get", kind, cluster.ControllerWebhooks, "--ignore-not-found", "-o", "name"); strings.TrimSpace(out) != "" {
			t.Errorf("%s left after %s", strings.TrimSpace(out), how)
		}
	}
	for _, sock := range []string{"node/run/rdmanet/daemon.sock"} {
		if _, err := os.Stat(filepath.Join(layout.Dir, sock)); err == nil {
			t.Errorf("%s left on the node after %s", sock, how)
		}
	}
	ents, _ := os.ReadDir(filepath.Join(layout.Dir, "node/var/lib/kubelet/device-plugins"))
	for _, e := range ents {
		if strings.Contains(e.Name(), "rdmanet") || strings.Contains(e.Name(), "sriov") || strings.Contains(e.Name(), "rdma") {
			t.Errorf("device plugin socket %s left after %s", e.Name(), how)
		}
	}
	// The runtime may still be running a CNI DEL for a sandbox it tears
	// down late (kubelet's sandbox GC); with the daemon gone the shim runs
	// rdmanet-direct, which works from its cache. Such a call is transient:
	// only one that outlives a minute is a process left behind.
	var left []string
	deadline := time.Now().Add(time.Minute)
	for {
		left = left[:0]
		for _, p := range cluster.NodeProcesses() {
			if strings.Contains(filepath.Base(p), "rdmanet") {
				left = append(left, p+" "+cniCall(p))
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	for _, p := range left {
		t.Errorf("rdmanet process left on the node a minute after %s: %s", how, p)
	}
}

// cniCall names the CNI call a process runs ("CNI_COMMAND=DEL
// CNI_CONTAINERID=..."), from its environment; "" for a process that is not
// a CNI call. p is a NodeProcesses entry ("pid exe").
func cniCall(p string) string {
	pid, _, _ := strings.Cut(p, " ")
	b, err := os.ReadFile("/proc/" + pid + "/environ")
	if err != nil {
		return ""
	}
	var out []string
	for _, kv := range strings.Split(string(b), "\x00") {
		if strings.HasPrefix(kv, "CNI_COMMAND=") || strings.HasPrefix(kv, "CNI_CONTAINERID=") || strings.HasPrefix(kv, "CNI_IFNAME=") {
			out = append(out, kv)
		}
	}
	return strings.Join(out, " ")
}

// hasLink reports whether `ip -o link show` output lists the link
// (busybox prints "2: eno1@eno1: ..." for a veth end).
func hasLink(out, name string) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && (f[1] == name+":" || strings.HasPrefix(f[1], name+"@")) {
			return true
		}
	}
	return false
}
