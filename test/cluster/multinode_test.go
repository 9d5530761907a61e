//go:build clustertest

package cluster_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/rdmanet/rdmanet/test/cluster"
)

// The cross-node tier (`make test-cluster-multi`): four nodes, the first
// two exclusive, the last two shared; CoreDNS and kube-proxy serve Services.
func TestMultiNode(t *testing.T) {
	if len(state.Nodes) < 3 {
		t.Fatalf("the cross-node scenarios need 3 nodes, the cluster has %d; run: make test-cluster-multi (RDMANET_CLUSTER_NODES=3)", len(state.Nodes))
	}
	t.Run("nodes Ready in their modes", testNodesReady)
	t.Run("cluster DNS and ClusterIP Services from every node", testClusterDNS)
	t.Run("exclusive seed job: ranks on two nodes, bytes across net1", testExclusiveAcrossNodes)
	t.Run("shared job: ranks on two shared nodes, bytes across net1", testSharedAcrossNodes)
	t.Run("DRA: GPUs and a VF under one PCIe root, on the one node with that fit", testDRAAcrossNodes)
	t.Run("rolling upgrade across nodes with both modes' pods running", testRollAcrossNodes)
	t.Run("kubectl rdma verify of a 16-pod workload across nodes", testVerify16)
	t.Run("a node's credentials reach only its own objects", testNodeCredentials)
	t.Run("InfiniBand: pool GUIDs on IB VFs across nodes, shared IPoIB, GUIDs back on DEL and by GC", testInfiniBand)
	t.Run("node loss: addresses freed, pods back elsewhere, node back", testNodeLoss)
}

// testNodesReady: every node is Ready with its mode label, and rdmanet's
// node pod runs on each.
func testNodesReady(t *testing.T) {
	for _, n := range state.Nodes {
		kubectl(t, "wait", "--for=condition=Ready", "node/"+n.Name, "--timeout=120s")
		if got := trim(kubectl(t, "get", "node", n.Name, "-o", fmt.Sprintf(`jsonpath={.metadata.labels.%s}`, strings.ReplaceAll(cluster.NodeModeLabel, ".", `\.`)))); got != n.Mode {
			t.Errorf("node %s: label %s=%q, want %q", n.Name, cluster.NodeModeLabel, got, n.Mode)
		}
	}
	ps := waitRunning(t, "rdmanet-system", "app.kubernetes.io/name=rdmanet-node", len(state.Nodes), 3*time.Minute)
	on := map[string]bool{}
	for _, p := range ps {
		on[p.Spec.NodeName] = true
	}
	for _, n := range state.Nodes {
		if !on[n.Name] {
			t.Errorf("no rdmanet-node pod on %s (pods on %v)", n.Name, on)
		}
	}
}

// testClusterDNS: a pod on each node resolves the kubernetes Service's name
// through the kube-dns ClusterIP (CoreDNS behind kube-proxy's rules) and
// gets its ClusterIP back.
func testClusterDNS(t *testing.T) {
	ns := "dns-check"
	kubectl(t, "create", "ns", ns)
	cleanupNamespace(t, ns)
	for _, n := range state.Nodes {
		pod := "dns-" + n.Name
		if err := k.Apply(ctx(t, time.Minute), fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: %s, labels: {app: dns-check}}
spec:
  nodeName: %s
  terminationGracePeriodSeconds: 1
  containers:
    - name: c
      image: %s
      imagePullPolicy: Never
      command: ["sh", "-c", "trap 'exit 0' TERM; sleep infinity & wait"]
`, pod, ns, n.Name, cluster.TestboxImage)); err != nil {
			t.Fatal(err)
		}
	}
	waitRunning(t, ns, "app=dns-check", len(state.Nodes), 3*time.Minute)
	for _, n := range state.Nodes {
		pod := "dns-" + n.Name
		var out string
		var err error
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(2 * time.Second) {
			out, err = execIn(t, ns, pod, "nslookup", "kubernetes.default.svc.cluster.local")
			if (err == nil && strings.Contains(out, cluster.ServiceIP)) || time.Now().After(deadline) {
				break
			}
		}
		if err != nil || !strings.Contains(out, cluster.ServiceIP) {
			t.Errorf("%s on %s: nslookup kubernetes.default.svc.cluster.local: %v\n%s", pod, n.Name, err, out)
		}
		conf, _ := execIn(t, ns, pod, "cat", "/etc/resolv.conf")
		if !strings.Contains(conf, "nameserver "+cluster.DNSServiceIP) {
			t.Errorf("%s: resolv.conf does not name the kube-dns ClusterIP %s:\n%s", pod, cluster.DNSServiceIP, conf)
		}
	}
}

// rendezvous is what test/images/rendezvous prints.
type rendezvous struct {
	Rank       int      `json:"rank"`
	MasterIPs  []string `json:"masterIPs"`
	LocalAddr  string   `json:"localAddr"`
	PeerAddr   string   `json:"peerAddr"`
	DataIfname string   `json:"dataIfname"`
	BulkBytes  int64    `json:"bulkBytes"`
	BulkMBps   float64  `json:"bulkMBps"`
	PingPongs  int      `json:"pingPongs"`
	RTTP50     float64  `json:"rttP50us"`
	RTTP99     float64  `json:"rttP99us"`
}

// crossJob is one of the seeds' two-rank Jobs run across nodes.
type crossJob struct {
	job, ns, sel string
	files        []string
	mode         string // the nodes' RDMA netns mode the ranks must land on
	// net1's addresses: in nadRange, never in excluded.
	nadRange, excluded string
	// counters: the fabric ports whose growth shows the bulk on the
	// training network ("rx"/"tx": the VF stand-ins; "shared-rx"/
	// "shared-tx": the shared PF the macvlan children send through).
	rx, tx string
}

var (
	exclusiveJob = crossJob{job: "face-trainer", ns: exclusiveNS, sel: exclusiveSel, files: exclusiveFiles, mode: cluster.ModeExclusive,
		nadRange: "10.60.0.0/16", excluded: "10.60.0.0/24", rx: "rx", tx: "tx"}
	sharedJob = crossJob{job: "shared-trainer", ns: exclusiveNS, sel: "app=shared-trainer", files: sharedFiles, mode: cluster.ModeShared,
		nadRange: "192.168.2.0/24", excluded: "192.168.2.0/28", rx: "shared-rx", tx: "shared-tx"}
)

// testExclusiveAcrossNodes runs the seed's exclusive Job unchanged: with 8
// GPUs per node each 8-GPU rank takes a node, so its two ranks land on the
// two exclusive nodes.
func testExclusiveAcrossNodes(t *testing.T) { runJobAcrossNodes(t, exclusiveJob) }

// testSharedAcrossNodes runs the shared Job (examples/cluster/shared) the
// same way: its ranks land on the two shared nodes, net1 a macvlan child of
// each node's shared-HCA PF.
func testSharedAcrossNodes(t *testing.T) {
	shared := 0
	for _, n := range state.Nodes {
		if n.Mode == cluster.ModeShared {
			shared++
		}
	}
	if shared < 2 {
		t.Fatalf("the shared Job's ranks need two shared nodes, the cluster has %d; fix: make test-cluster-multi (NODES=4 SHARED_NODES=2)", shared)
	}
	runJobAcrossNodes(t, sharedJob)
}

// runJobAcrossNodes applies j's files, waits for its two ranks on two
// nodes of j's mode, and has them do what NCCL's bootstrap does: rank 1
// finds rank 0 by the Job's MASTER_ADDR (its headless Service's name) over
// eth0, they exchange net1 addresses and move bytes over net1; the
// training fabric's ports count them on both nodes. Then kubectl rdma
// verify checks the pair.
func runJobAcrossNodes(t *testing.T, j crossJob) {
	applyExample(t, "", "examples/cluster/namespace.yaml")
	applyExample(t, j.ns, j.files...)
	ps := waitRunning(t, j.ns, j.sel, 2, 4*time.Minute)
	byRank := map[string]corev1.Pod{}
	for _, p := range ps {
		byRank[p.Annotations["batch.kubernetes.io/job-completion-index"]] = p
	}
	r0, r1 := byRank["0"], byRank["1"]
	if r0.Name == "" || r1.Name == "" {
		t.Fatalf("pods %v: want completion indexes 0 and 1", podNames(ps))
	}
	if r0.Spec.NodeName == r1.Spec.NodeName {
		t.Fatalf("both ranks on %s: the 8-GPU ranks should take a node each", r0.Spec.NodeName)
	}
	nodeOf := map[string]cluster.Node{}
	for _, n := range state.Nodes {
		nodeOf[n.Name] = n
	}
	for _, p := range ps {
		if m := nodeOf[p.Spec.NodeName].Mode; m != j.mode {
			t.Errorf("%s on %s, a %s node; want a %s node", p.Name, p.Spec.NodeName, m, j.mode)
		}
		if out, err := execIn(t, j.ns, p.Name, "ip", "route", "show", "default"); err != nil || !strings.Contains(out, "dev eth0") {
			t.Errorf("%s: default route not on eth0: %v %q", p.Name, err, out)
		}
	}
	net1 := map[string]string{}
	_, nadRange, _ := net.ParseCIDR(j.nadRange)
	_, excluded, _ := net.ParseCIDR(j.excluded)
	for _, p := range ps {
		st := find(waitNetworkStatus(t, j.ns, p.Name), "net1")
		if st == nil || len(st.IPs) == 0 {
			t.Fatalf("%s: network-status has no net1 address", p.Name)
		}
		ip := net.ParseIP(st.IPs[0])
		if !nadRange.Contains(ip) || excluded.Contains(ip) {
			t.Errorf("%s: net1 %s outside the NAD's range %s less %s", p.Name, ip, j.nadRange, j.excluded)
		}
		net1[p.Name] = ip.String()
	}

	before := fabricCounters(t)
	const bulk = 64 << 20
	var wg sync.WaitGroup
	outs, errs := make([]string, 2), make([]error, 2)
	for i, p := range []corev1.Pod{r0, r1} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = execIn(t, j.ns, p.Name, "rdmanet-rendezvous", "--bulk-bytes", fmt.Sprint(bulk), "--timeout", "90s")
		}()
		if i == 0 {
			time.Sleep(time.Second) // rank 0 listens first; rank 1 retries anyway
		}
	}
	wg.Wait()
	var res [2]rendezvous
	for i := range res {
		if errs[i] != nil {
			t.Fatalf("rank %d: %v\n%s", i, errs[i], outs[i])
		}
		if err := json.Unmarshal([]byte(trim(outs[i])), &res[i]); err != nil {
			t.Fatalf("rank %d output %q: %v", i, outs[i], err)
		}
	}
	after := fabricCounters(t)
	t.Logf("%s: rank 1 on %s -> rank 0 on %s over net1: %d bytes at %.0f MiB/s, ping-pong p50 %.0f us p99 %.0f us",
		j.job, r1.Spec.NodeName, r0.Spec.NodeName, res[1].BulkBytes, res[1].BulkMBps, res[1].RTTP50, res[1].RTTP99)

	if len(res[1].MasterIPs) == 0 || res[1].MasterIPs[0] != r0.Status.PodIP {
		t.Errorf("rank 1 resolved MASTER_ADDR to %v, want rank 0's eth0 address %s", res[1].MasterIPs, r0.Status.PodIP)
	}
	for i, p := range []corev1.Pod{r0, r1} {
		if res[i].DataIfname != "net1" {
			t.Errorf("rank %d: data connection on %q, want net1", i, res[i].DataIfname)
		}
		if res[i].LocalAddr != net1[p.Name] {
			t.Errorf("rank %d: net1 address %s, network-status says %s", i, res[i].LocalAddr, net1[p.Name])
		}
		if res[i].BulkBytes != bulk {
			t.Errorf("rank %d: bulk %d bytes, want %d", i, res[i].BulkBytes, bulk)
		}
	}
	if res[0].PeerAddr != net1[r1.Name] || res[1].PeerAddr != net1[r0.Name] {
		t.Errorf("exchanged addresses %s / %s, want %s / %s", res[0].PeerAddr, res[1].PeerAddr, net1[r1.Name], net1[r0.Name])
	}
	// Rank 1 sent the bulk: its node's port received it from the pod (rx
	// on the fabric side) and rank 0's node's port sent it to the pod.
	sent := counterGrowth(before, after, nodeOf[r1.Spec.NodeName], j.rx)
	recv := counterGrowth(before, after, nodeOf[r0.Spec.NodeName], j.tx)
	if sent < bulk || recv < bulk {
		t.Errorf("training fabric counters (%s/%s): %s's ports took %d bytes from its pod, %s's gave %d to its pod; want both >= %d",
			j.rx, j.tx, r1.Spec.NodeName, sent, r0.Spec.NodeName, recv, bulk)
	}
	if up := counterGrowth(before, after, nodeOf[r1.Spec.NodeName], "rx-uplink"); up >= bulk {
		t.Errorf("%s's management uplink took %d bytes: the bulk went over eth0, not net1", r1.Spec.NodeName, up)
	}
	verifyPairs(t, j.ns, 2, true, "job/"+j.job)
}

// verifyPairs runs `kubectl rdma verify -n ns target`: its probe
// (rdmanet's image, as ephemeral containers) must find every one of the
// pods pairs of the workload reachable over net1 at the NAD's MTU with
// don't-fragment; with crossNode every pair is on two nodes.
func verifyPairs(t *testing.T, ns string, pods int, crossNode bool, target ...string) {
	bin := buildKubectlRDMA(t)
	start := time.Now()
	cmd := exec.Command(bin, append([]string{"verify", "--kubeconfig", state.Kubeconfig, "-n", ns, "--pod-checks=false", "-o", "json"}, target...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("kubectl rdma verify -n %s %s: %v\nstdout: %s\nstderr: %s", ns, strings.Join(target, " "), err, out, stderr.String())
	}
	var rep struct {
		Pairs struct {
			Cells []struct {
				From, To  string
				CrossNode bool   `json:"cross_node"`
				Status    string `json:"status"`
			} `json:"cells"`
			Summary struct {
				Cells, OK int
				Result    string
			} `json:"summary"`
		} `json:"pairs"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("verify JSON: %v\n%s", err, out)
	}
	t.Logf("kubectl rdma verify -n %s %s: %d pair cells, %d ok, in %.1fs", ns, strings.Join(target, " "), rep.Pairs.Summary.Cells, rep.Pairs.Summary.OK, took.Seconds())
	if want := pods * (pods - 1); len(rep.Pairs.Cells) != want {
		t.Fatalf("verify: %d pair cells, want %d (every ordered pair of %d pods):\n%s", len(rep.Pairs.Cells), want, pods, out)
	}
	for _, c := range rep.Pairs.Cells {
		if c.Status != "ok" || (crossNode && !c.CrossNode) {
			t.Errorf("verify cell %s -> %s: %s (cross-node %v), want ok (across nodes: %v)", c.From, c.To, c.Status, c.CrossNode, crossNode)
		}
	}
}

// testVerify16: 16 single-VF pods (the seed's NAD in a namespace of their
// own) spread over the exclusive nodes; kubectl rdma verify by label
// selector checks all 240 ordered pairs. Its time is the figure the issue
// asks for.
func testVerify16(t *testing.T) {
	const ns = "verify-16"
	applyExample(t, ns)
	if err := k.Apply(ctx(t, time.Minute), vfFill(ns, 16)); err != nil {
		t.Fatal(err)
	}
	ps := waitRunning(t, ns, "app="+ns, 16, 5*time.Minute)
	nodes := map[string]int{}
	for _, p := range ps {
		nodes[p.Spec.NodeName]++
	}
	t.Logf("16 pods over nodes %v", nodes)
	verifyPairs(t, ns, 16, false, "-l", "app="+ns)
}

func podNames(ps []corev1.Pod) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name+"@"+p.Spec.NodeName)
	}
	return out
}

// fabricCounters reads every port of the fabric namespace's bridges:
// name -> {rx_bytes, tx_bytes}.
func fabricCounters(t *testing.T) map[string][2]int64 {
	t.Helper()
	out, err := exec.Command("ip", "-n", cluster.WireNetns, "-j", "-s", "link", "show").Output()
	if err != nil {
		t.Fatalf("ip -n %s -j -s link show: %v", cluster.WireNetns, err)
	}
	var links []struct {
		Ifname string `json:"ifname"`
		Stats  struct {
			RX struct {
				Bytes int64 `json:"bytes"`
			} `json:"rx"`
			TX struct {
				Bytes int64 `json:"bytes"`
			} `json:"tx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		t.Fatalf("fabric link stats: %v", err)
	}
	m := map[string][2]int64{}
	for _, l := range links {
		m[l.Ifname] = [2]int64{l.Stats.RX.Bytes, l.Stats.TX.Bytes}
	}
	return m
}

// counterGrowth sums how much node n's VF ports' rx (or tx) bytes grew on
// the fabric side; "rx-uplink" is the node's management uplink's rx.
func counterGrowth(before, after map[string][2]int64, n cluster.Node, what string) int64 {
	ports := map[string]bool{}
	switch what {
	case "rx-uplink":
		ports[cluster.FabricPort(n, "up")] = true
	case "rx", "tx":
		for _, p := range cluster.VFFabricPorts(n) {
			ports[p] = true
		}
	case "shared-rx", "shared-tx":
		ports[cluster.SharedPFFabricPort(n)] = true
	}
	var sum int64
	for name, a := range after {
		if !ports[name] {
			continue
		}
		b := before[name]
		if strings.HasSuffix(what, "tx") {
			sum += a[1] - b[1]
		} else {
			sum += a[0] - b[0]
		}
	}
	return sum
}

const lossNS = "node-loss"

// lossManifest: a NAD of its own over the seed's VF pool and a Deployment
// of two single-VF pods spread over the exclusive nodes (no GPUs, so the
// survivor can take both).
func lossManifest() string {
	return fmt.Sprintf(`apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: loss-net
  namespace: %[1]s
  annotations: {k8s.v1.cni.cncf.io/resourceName: example.com/sriov_rdma}
spec:
  config: '{"cniVersion": "0.3.1", "name": "loss-net", "plugins": [{"type": "sriov", "ipam": {"type": "whereabouts", "range": "10.61.0.0/24"}}, {"type": "rdma"}]}'
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: loss, namespace: %[1]s}
spec:
  replicas: 2
  selector: {matchLabels: {app: loss}}
  template:
    metadata:
      labels: {app: loss}
      annotations: {k8s.v1.cni.cncf.io/networks: loss-net}
    spec:
      terminationGracePeriodSeconds: 1
      nodeSelector: {%[2]s: exclusive}
      topologySpreadConstraints:
        - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app: loss}}}
      containers:
        - name: c
          image: %[3]s
          imagePullPolicy: Never
          command: ["sh", "-c", "trap 'exit 0' TERM; sleep infinity & wait"]
          securityContext: {capabilities: {add: [IPC_LOCK]}}
          resources:
            requests: {example.com/sriov_rdma: "1"}
            limits: {example.com/sriov_rdma: "1"}
`, lossNS, cluster.NodeModeLabel, cluster.TestboxImage)
}

// testNodeLoss crashes the exclusive node (not the control plane's) that
// runs one of the Deployment's pods: the pod's address is freed once the
// pod is gone, its replacement runs on the surviving node with a new
// address, and at no moment do two live pods share an address or (on one
// node) a VF. Then the node comes back and serves pods again.
func testNodeLoss(t *testing.T) {
	kubectl(t, "create", "ns", lossNS)
	cleanupNamespace(t, lossNS)
	if err := k.Apply(ctx(t, time.Minute), lossManifest()); err != nil {
		t.Fatal(err)
	}
	ps := waitRunning(t, lossNS, "app=loss", 2, 3*time.Minute)
	var victim corev1.Pod
	for _, p := range ps {
		if p.Spec.NodeName != cluster.NodeName {
			victim = p
		}
	}
	if victim.Name == "" {
		t.Fatalf("both pods on %s (%v): the spread should put one on the other exclusive node", cluster.NodeName, podNames(ps))
	}
	lost := victim.Spec.NodeName
	lostIP := find(waitNetworkStatus(t, lossNS, victim.Name), "net1").IPs[0]
	// The controller's leader must outlive the crash for the 60 s goal: a
	// leader lost with its node costs the Lease's failover on top (and the
	// new leader never sees the Node's deletion event; Kubernetes' pod GC
	// then deletes the pods within 60 s of the deletion, and their
	// addresses go with them). Move the leadership off the node first.
	moveLeaderOff(t, lost)
	t.Cleanup(func() { // the node back whatever happened, for what follows
		if _, err := k.Output(ctx(t, time.Minute), "get", "node", lost); err != nil {
			if out, err := clusterNodeCmd("node-up", lost); err != nil {
				t.Errorf("node-up %s: %v\n%s", lost, err, out)
			}
		}
	})

	stop := make(chan struct{})
	var dup []string
	var mu sync.Mutex
	go func() { // at no point two live pods with one address or one VF
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			if d := duplicateHolders(t); len(d) > 0 {
				mu.Lock()
				dup = append(dup, d...)
				mu.Unlock()
			}
		}
	}()

	start := time.Now()
	out, err := clusterNodeCmd("node-down", lost)
	if err != nil {
		t.Fatalf("node-down %s: %v\n%s", lost, err, out)
	}
	var freedAfter time.Duration
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(time.Second) {
		if owner, held := ipamAllocations(t)[lostIP]; !held || owner != lossNS+"/"+victim.Name {
			freedAfter = time.Since(start)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s (the lost pod %s's net1) still allocated 3m after %s went down", lostIP, victim.Name, lost)
		}
	}
	// The lost pod stays in the API (phase Running, as last reported)
	// until Kubernetes' pod GC deletes it; its replacement comes then.
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(time.Second) {
		if _, err := k.Output(ctx(t, 30*time.Second), "-n", lossNS, "get", "pod", victim.Name); err != nil && strings.Contains(err.Error(), "NotFound") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lost pod %s still in the API 3m after %s went down", victim.Name, lost)
		}
	}
	back := waitRunning(t, lossNS, "app=loss", 2, 3*time.Minute)
	backAfter := time.Since(start)
	close(stop)
	t.Logf("node %s down: its pod's address %s freed after %.0fs, both replicas Running again after %.0fs", lost, lostIP, freedAfter.Seconds(), backAfter.Seconds())
	if freedAfter > 60*time.Second {
		t.Errorf("the lost pod's address was freed after %.0fs, want within 60s", freedAfter.Seconds())
	}
	for _, p := range back {
		if p.Spec.NodeName == lost {
			t.Errorf("%s on the lost node %s", p.Name, lost)
		}
		if p.Name == victim.Name {
			continue
		}
		st := find(waitNetworkStatus(t, lossNS, p.Name), "net1")
		if st == nil || len(st.IPs) == 0 {
			t.Errorf("%s: no net1 address", p.Name)
		}
	}
	mu.Lock()
	if len(dup) > 0 {
		t.Errorf("two live pods held one address or VF: %v", dup)
	}
	mu.Unlock()

	// The node comes back and serves pods again.
	out, err = clusterNodeCmd("node-up", lost)
	if err != nil {
		t.Fatalf("node-up %s: %v\n%s", lost, err, out)
	}
	waitRunning(t, "rdmanet-system", "app.kubernetes.io/name=rdmanet-node", len(state.Nodes), 3*time.Minute)
	waitAllocatableOn(t, lost, vfResource, fmt.Sprint(cluster.NumVFs))
	kubectl(t, "-n", lossNS, "scale", "deployment/loss", "--replicas=3")
	ps = waitRunning(t, lossNS, "app=loss", 3, 3*time.Minute)
	onLost := false
	for _, p := range ps {
		onLost = onLost || p.Spec.NodeName == lost
	}
	if !onLost {
		t.Errorf("after node-up no pod went to %s: %v", lost, podNames(ps))
	}
	// A workload nobody here wrote for verify (own namespace, own NAD, a
	// Deployment) passes it too; two of its pods share a node.
	verifyPairs(t, lossNS, 3, false, "deploy/loss")
}

// duplicateHolders lists addresses (net1, from network-status) held by two
// live pods, and VFs (PCI address on one node) held by two live pods.
func duplicateHolders(t *testing.T) []string {
	var list corev1.PodList
	out, err := k.Output(ctx(t, 30*time.Second), "get", "pods", "-A", "-o", "json")
	if err != nil || json.Unmarshal([]byte(out), &list) != nil {
		return nil
	}
	ips, vfs := map[string]string{}, map[string]string{}
	var dup []string
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			continue
		}
		var st []networkStatus
		if json.Unmarshal([]byte(p.Annotations["k8s.v1.cni.cncf.io/network-status"]), &st) != nil {
			continue
		}
		for _, s := range st {
			if s.Default {
				continue
			}
			for _, ip := range s.IPs {
				if o, ok := ips[ip]; ok {
					dup = append(dup, fmt.Sprintf("%s: %s and %s/%s", ip, o, p.Namespace, p.Name))
				}
				ips[ip] = p.Namespace + "/" + p.Name
			}
			if s.DeviceInfo != nil && s.DeviceInfo.PCI != nil && s.DeviceInfo.PCI.PCIAddress != "" {
				key := p.Spec.NodeName + "/" + s.DeviceInfo.PCI.PCIAddress
				if o, ok := vfs[key]; ok {
					dup = append(dup, fmt.Sprintf("VF %s: %s and %s/%s", key, o, p.Namespace, p.Name))
				}
				vfs[key] = p.Namespace + "/" + p.Name
			}
		}
	}
	return dup
}

// waitAllocatableOn waits until node reports resource allocatable = want.
func waitAllocatableOn(t *testing.T, node, resource, want string) {
	t.Helper()
	path := fmt.Sprintf(`jsonpath={.status.allocatable.%s}`, strings.ReplaceAll(resource, ".", `\.`))
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(time.Second) {
		got, _ := k.Output(ctx(t, 30*time.Second), "get", "node", node, "-o", path)
		if trim(got) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s: allocatable %s = %q after 3m, want %s", node, resource, trim(got), want)
		}
	}
}

// moveLeaderOff makes sure rdmanet-controller's leader does not run on
// node: its pod is deleted until another replica leads.
func moveLeaderOff(t *testing.T, node string) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
		holder := leaseHolder(t)
		on := trim(kubectl(t, "-n", "rdmanet-system", "get", "pod", holder, "-o", "jsonpath={.spec.nodeName}", "--ignore-not-found"))
		if holder != "" && on != "" && on != node {
			t.Logf("rdmanet-controller's leader %s runs on %s", holder, on)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rdmanet-controller's leader still on %s (or none) after 2m", node)
		}
		if on == node {
			t.Logf("rdmanet-controller's leader %s runs on %s, the node to crash: deleting it so another replica leads", holder, node)
			_, _ = k.Output(ctx(t, time.Minute), "-n", "rdmanet-system", "delete", "pod", holder, "--wait=false")
			time.Sleep(5 * time.Second)
		}
	}
}

// clusterNodeCmd runs `rdmanet-cluster node-down|node-up NODE` (what make
// cluster-node-down/-up run) on this tier's cluster.
func clusterNodeCmd(verb, node string) ([]byte, error) {
	return exec.Command(os.Getenv("RDMANET_CLUSTER_BIN"), verb, "--state-dir", layout.Dir, "--repo", layout.Repo, node).CombinedOutput()
}
