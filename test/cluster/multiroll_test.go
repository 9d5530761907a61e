//go:build clustertest

package cluster_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/rdmanet/rdmanet/test/cluster"
)

const rollNS = "roll-multi"

// testRollAcrossNodes rolls the rdmanet DaemonSet to a new image tag on
// every node while the exclusive and the shared Job run (their ranks on
// all four nodes): no rank loses net1 or its address; pods created while
// the roll is under way attach (exclusive and shared); after the roll the
// new daemons DEL the Jobs' pods and every address comes back. It logs
// each node's time from its old rdmanet pod leaving to its new one Ready.
func testRollAcrossNodes(t *testing.T) {
	applyExample(t, "", "examples/cluster/namespace.yaml")
	var running []corev1.Pod
	for _, j := range []crossJob{exclusiveJob, sharedJob} {
		applyExample(t, j.ns, j.files...)
	}
	for _, j := range []crossJob{exclusiveJob, sharedJob} {
		running = append(running, waitRunning(t, j.ns, j.sel, 2, 4*time.Minute)...)
	}
	before := map[string]string{}
	for _, p := range running {
		got := ipv4Of(t, p.Namespace, p.Name, "net1")
		if len(got) == 0 {
			t.Fatalf("%s: no net1 address before the roll", p.Name)
		}
		before[p.Name] = got[0]
	}

	var newRef string
	tag := fmt.Sprintf("rolled-%d", time.Now().Unix()) // new on every run, also on a kept cluster
	for _, n := range state.Nodes {
		newRef = tagImage(t, n, tag)
	}
	applyExample(t, rollNS)
	start := time.Now()
	kubectl(t, "-n", "rdmanet-system", "set", "image", "daemonset/rdmanet-node", "*="+newRef)
	// Pods created while the roll is under way, one per mode (any node
	// may be mid-roll when they arrive).
	if err := k.Apply(ctx(t, time.Minute), rollPods(t)); err != nil {
		t.Fatal(err)
	}
	perNode := watchRoll(t, newRef, 10*time.Minute)
	t.Logf("daemonset rolled to %s on %d nodes in %.0fs", newRef, len(state.Nodes), time.Since(start).Seconds())
	for _, n := range state.Nodes {
		t.Logf("  %s: old rdmanet pod gone -> new one Ready in %.1fs", n.Name, perNode[n.Name].Seconds())
	}

	for _, p := range running {
		got := ipv4Of(t, p.Namespace, p.Name, "net1")
		if len(got) == 0 || got[0] != before[p.Name] {
			t.Errorf("%s on %s: net1 %v after the roll, had %s", p.Name, p.Spec.NodeName, got, before[p.Name])
		}
	}
	// A pod bound to a node while that node's device plugin restarts
	// fails kubelet's admission (UnexpectedAdmissionError: kubelet marks a
	// plugin's devices unhealthy until it registers again); its controller
	// replaces it. Count those, then check the replacements attached.
	for _, d := range []string{"during-exclusive", "during-shared"} {
		kubectl(t, "-n", rollNS, "rollout", "status", "deployment/"+d, "--timeout=240s")
	}
	rejected := 0
	var live []corev1.Pod
	for _, p := range pods(t, rollNS, "app="+rollNS) {
		switch {
		case p.Status.Phase == corev1.PodFailed && p.Status.Reason == "UnexpectedAdmissionError":
			rejected++
		case p.Status.Phase == corev1.PodRunning:
			live = append(live, p)
		}
	}
	t.Logf("pods created during the roll: %d Running, %d refused by kubelet's admission while a device plugin re-registered (replaced by their Deployment)", len(live), rejected)
	if len(live) != 2 {
		t.Fatalf("%d pods Running in %s, want one per Deployment", len(live), rollNS)
	}
	for _, p := range live {
		if got := ipv4Of(t, rollNS, p.Name, "net1"); len(got) == 0 {
			t.Errorf("%s (created during the roll) on %s: no net1", p.Name, p.Spec.NodeName)
		}
	}

	// The new daemons DEL what the old ones ADDed: every address of the
	// Jobs' pods and the roll's pods comes back.
	kubectl(t, "delete", "ns", exclusiveNS, rollNS, "--wait", "--timeout=300s")
	for ip, pod := range ipamAllocations(t) {
		if ns, _, _ := strings.Cut(pod, "/"); ns == exclusiveNS || ns == rollNS {
			t.Errorf("address %s still held by deleted %s after DEL on the rolled daemons", ip, pod)
		}
	}
}

// rollPods is two Deployments of one pod each in rollNS: one exclusive (a
// VF of the seed's pool, seed NAD), one shared (the shared pool, the
// shared NAD).
func rollPods(t *testing.T) string {
	t.Helper()
	nad, err := os.ReadFile(repoPath("examples/cluster/shared/nad.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	shared := strings.ReplaceAll(string(nad), "namespace: "+exclusiveNS, "namespace: "+rollNS)
	deployment := func(name, network, res string) string {
		return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  replicas: 1
  selector: {matchLabels: {app: %[2]s, deployment: %[1]s}}
  template:
    metadata:
      labels: {app: %[2]s, deployment: %[1]s}
      annotations: {k8s.v1.cni.cncf.io/networks: '[{"name": "%[3]s", "interface": "net1"}]'}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: c
          image: %[4]s
          imagePullPolicy: Never
          command: ["sh", "-c", "trap 'exit 0' TERM; sleep infinity & wait"]
          securityContext: {capabilities: {add: [IPC_LOCK]}}
          resources: {limits: {%[5]s: "1"}}
`, name, rollNS, network, cluster.TestboxImage, res)
	}
	return strings.Join([]string{seedNADIn(t, rollNS), shared,
		deployment("during-exclusive", "face-training-rdma", vfResource),
		deployment("during-shared", "rdmashared-net", "rdma/rdma_shared_device_eth")}, "\n---\n")
}

// watchRoll polls the rdmanet node pods until every node runs a Ready pod
// of image ref, and returns per node the time from its old pod's last
// Ready sighting to its new pod's first.
func watchRoll(t *testing.T, ref string, limit time.Duration) map[string]time.Duration {
	t.Helper()
	lastOld := map[string]time.Time{}
	for _, n := range state.Nodes {
		lastOld[n.Name] = time.Now()
	}
	firstNew := map[string]time.Time{}
	for deadline := time.Now().Add(limit); len(firstNew) < len(state.Nodes); time.Sleep(500 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("daemonset not rolled to %s on every node after %s (new pods Ready on %v)", ref, limit, firstNew)
		}
		now := time.Now()
		for _, p := range pods(t, "rdmanet-system", "app.kubernetes.io/name=rdmanet-node") {
			if !podReady(p) {
				continue
			}
			n := p.Spec.NodeName
			if p.Spec.Containers[0].Image != ref {
				lastOld[n] = now
			} else if _, ok := firstNew[n]; !ok {
				firstNew[n] = now
			}
		}
	}
	out := map[string]time.Duration{}
	for n, at := range firstNew {
		out[n] = at.Sub(lastOld[n])
	}
	return out
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
