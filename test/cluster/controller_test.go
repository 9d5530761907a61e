//go:build clustertest

package cluster_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/rdmanet/rdmanet/internal/webhook"
	"github.com/rdmanet/rdmanet/test/cluster"
)

// testController: rdmanet-controller (installed with deploy/, this
// checkout's image) on the real node: its admission webhooks called by the
// real kube-apiserver through the controller's Service, the node label it
// mirrors from the agent's annotation, opt-in pods of all three modes
// mutated and Running, wrong pods refused with the rule and the fix (opted
// in, or in a namespace labelled rdmanet.io/enforce=true) or admitted with
// the findings as warnings (elsewhere), kubectl rdma verify passing good
// pods and naming the broken layer of broken ones, a leader change, the
// webhook down under both failure policies, and the address of a deleted
// pod free again.
func testController(t *testing.T) {
	// The agent annotates the node with its RDMA netns mode; the controller
	// mirrors it into the label the webhook's node affinity needs.
	waitNodeLabel(t, webhook.NodeLabelNetnsMode, "exclusive", 2*time.Minute)
	// The opt-in exclusive pod must get its VF through the device plugin
	// (the checks below read PodResources' device-plugin devices).
	waitAllocatable(t, vfResource, fmt.Sprint(cluster.NumVFs))
	applyExample(t, exclusiveNS, "examples/cluster/exclusive/nad.yaml")
	bin := buildKubectlRDMA(t)

	const pod = "optin-exclusive"
	var ip string
	t.Run("opt-in exclusive pod is mutated, Running with net1, verify passes", func(t *testing.T) {
		if err := k.Apply(ctx(t, time.Minute), optInPod(pod, exclusiveNS, "")); err != nil {
			t.Fatal(err)
		}
		var p corev1.Pod
		if err := json.Unmarshal([]byte(kubectl(t, "-n", exclusiveNS, "get", "pod", pod, "-o", "json")), &p); err != nil {
			t.Fatal(err)
		}
		checkMutated(t, &p)
		waitRunning(t, exclusiveNS, "app="+pod, 1, 3*time.Minute)
		_, ip = checkExclusive(t, exclusiveNS, pod, podResources(t))
		checkVerifyGood(t, bin, exclusiveNS, pod, "node-resource", "nad-exists", "nad-resource", "network-status", "device-info", "exec",
			"training-interface", "default-route", "dev-infiniband", "memlock", "cap-ipc-lock", "nccl-transport", "nccl-socket-ifname")
	})

	t.Run("pods breaking an error rule are refused with the rule and the fix", func(t *testing.T) {
		// Opted in: refused in any namespace.
		err := k.Apply(ctx(t, time.Minute), optInPod("bad-ifname", exclusiveNS, "eth1"))
		if err == nil {
			kubectl(t, "-n", exclusiveNS, "delete", "pod", "bad-ifname", "--wait=false")
			t.Fatal("the API server admitted an opted-in pod with NCCL_SOCKET_IFNAME=eth1")
		}
		for _, w := range []string{"validate-pod.rdmanet.io", "RDMA073", "NCCL_SOCKET_IFNAME", "fix:"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("denial does not contain %q: %v", w, err)
			}
		}
		// Not opted in, in a namespace labelled for enforcement: refused.
		kubectl(t, "label", "ns", exclusiveNS, webhook.NamespaceLabelEnforce+"=true")
		defer kubectl(t, "label", "ns", exclusiveNS, webhook.NamespaceLabelEnforce+"-")
		deadline := time.Now().Add(30 * time.Second) // the API server's namespace informer catches up
		for {
			err = k.Apply(ctx(t, time.Minute), vfPod("enforced-no-ipc-lock", exclusiveNS, false, ""))
			if err == nil {
				kubectl(t, "-n", exclusiveNS, "delete", "pod", "enforced-no-ipc-lock", "--wait=false")
			}
			if (err != nil && strings.Contains(err.Error(), "enforce-pod.rdmanet.io")) || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Second)
		}
		for _, w := range []string{"enforce-pod.rdmanet.io", "RDMA060", "IPC_LOCK", "fix:"} {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("VF pod without IPC_LOCK in a namespace labelled %s=true: denial does not contain %q: %v", webhook.NamespaceLabelEnforce, w, err)
			}
		}
	})

	t.Run("broken pods outside enforcement: admitted with warnings, verify names the broken layer", func(t *testing.T) {
		tests := []struct {
			name, manifest string
			warn           string // rule in the admission warnings
			check          string // the verify check that must be a problem
			evidence       string
		}{
			{name: "no-ipc-lock", manifest: vfPod("no-ipc-lock", exclusiveNS, false, ""), warn: "RDMA060", check: "cap-ipc-lock", evidence: "IPC_LOCK"},
			{name: "wrong-ifname", manifest: vfPod("wrong-ifname", exclusiveNS, true, "eth1"), warn: "RDMA073", check: "nccl-socket-ifname", evidence: "eth1"},
			{name: "no-net1", manifest: vfPod("no-net1", "", true, ""), warn: "RDMA013", check: "nad-exists", evidence: "no net1"},
		}
		t.Cleanup(func() {
			_, _ = k.Output(ctx(t, 3*time.Minute), "-n", exclusiveNS, "delete", "pod", "no-ipc-lock", "wrong-ifname", "no-net1", "--ignore-not-found", "--wait", "--timeout=120s")
		})
		for _, tc := range tests {
			warnings, err := k.ApplyArgs(ctx(t, time.Minute), tc.manifest)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if !strings.Contains(warnings, tc.warn) || !strings.Contains(warnings, "admitted because it does not opt in") {
				t.Errorf("%s: kubectl apply warnings %q lack %s and the reason it was admitted", tc.name, warnings, tc.warn)
			}
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				waitRunning(t, exclusiveNS, "app="+tc.name, 1, 3*time.Minute)
				rep, code := verifyPod(t, bin, exclusiveNS, tc.name)
				if got := rep.status(tc.check); got != "problem" || !strings.Contains(rep.evidence(tc.check), tc.evidence) {
					t.Errorf("check %s: %s (%s), want problem naming %s", tc.check, got, rep.evidence(tc.check), tc.evidence)
				}
				if code != 1 {
					t.Errorf("exit %d, want 1", code)
				}
			})
		}
	})

	t.Run("verify after the NAD is deleted names it", func(t *testing.T) {
		if ip == "" {
			t.Skip("no opt-in pod Running (see above)")
		}
		// The NAD deleted after the pod started: a restart would fail.
		kubectl(t, "delete", "-f", repoPath("examples/cluster/exclusive/nad.yaml"))
		rep, code := verifyPod(t, bin, exclusiveNS, pod)
		if got := rep.status("nad-exists"); got != "problem" || !strings.Contains(rep.evidence("nad-exists"), "face-training-rdma") {
			t.Errorf("check nad-exists after the NAD was deleted: %s (%s), want problem naming face-training-rdma", got, rep.evidence("nad-exists"))
		}
		if code != 1 {
			t.Errorf("exit %d, want 1", code)
		}
	})

	t.Run("the deleted pod's address is free again", func(t *testing.T) {
		if ip == "" {
			t.Skip("no opt-in pod Running (see above)")
		}
		start := time.Now()
		kubectl(t, "-n", exclusiveNS, "delete", "pod", pod, "--wait=false")
		for {
			held := false
			for _, owner := range ipamAllocations(t) {
				held = held || owner == exclusiveNS+"/"+pod
			}
			if !held {
				break
			}
			if time.Since(start) > time.Minute {
				t.Fatalf("address %s of %s/%s still allocated a minute after the pod's deletion", ip, exclusiveNS, pod)
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Logf("address %s free %.1f s after kubectl delete pod (CNI DEL or rdmanet-controller's IPAM GC, whichever first)", ip, time.Since(start).Seconds())
		waitGone(t, exclusiveNS, "app="+pod, 2*time.Minute)
	})

	t.Run("leader pod deleted: the other replica leads", func(t *testing.T) {
		old := leaseHolder(t)
		start := time.Now()
		kubectl(t, "-n", webhook.DefaultNamespace, "delete", "pod", old, "--wait=false")
		for {
			h := leaseHolder(t)
			if h != "" && h != old {
				t.Logf("leader %s → %s in %.1f s", old, h, time.Since(start).Seconds())
				break
			}
			if time.Since(start) > 2*time.Minute {
				t.Fatalf("lease still held by %q two minutes after its pod %s was deleted", h, old)
			}
			time.Sleep(500 * time.Millisecond)
		}
		rollout(t, "deployment/rdmanet-controller")
		// The new leader's node labeler: the label follows the agent into
		// shared mode in the next step.
	})

	t.Run("opt-in shared and host pods are mutated, Running, verify passes", func(t *testing.T) {
		switchToShared(t)
		waitNodeLabel(t, webhook.NodeLabelNetnsMode, "shared", 2*time.Minute)
		applyExample(t, exclusiveNS, "examples/cluster/shared/nad.yaml")
		shared := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: optin-shared
  namespace: %[1]s
  labels: {app: optin-shared}
  annotations: {rdmanet.io/network: %[1]s/rdmashared-net, rdmanet.io/resource: %[2]s}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: trainer
      image: %[3]s
      imagePullPolicy: Never
      command: ["sh", "-c", "trap 'exit 0' TERM; sleep infinity & wait"]
---
apiVersion: v1
kind: Pod
metadata:
  name: optin-host
  namespace: %[1]s
  labels: {app: optin-host}
  annotations: {rdmanet.io/mode: host, rdmanet.io/resource: %[2]s, rdmanet.io/socket-ifname: %[4]s}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  containers:
    - name: trainer
      image: %[3]s
      imagePullPolicy: Never
      command: ["sh", "-c", "trap 'exit 0' TERM; sleep infinity & wait"]
`, exclusiveNS, sharedResource, cluster.TestboxImage, cluster.UplinkDev)
		t.Cleanup(func() {
			_, _ = k.Output(ctx(t, 3*time.Minute), "-n", exclusiveNS, "delete", "pod", "optin-shared", "optin-host", "--ignore-not-found", "--wait", "--timeout=120s")
		})
		if err := k.Apply(ctx(t, time.Minute), shared); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"optin-shared", "optin-host"} {
			var p corev1.Pod
			if err := json.Unmarshal([]byte(kubectl(t, "-n", exclusiveNS, "get", "pod", name, "-o", "json")), &p); err != nil {
				t.Fatal(err)
			}
			c := p.Spec.Containers[0]
			if q, ok := c.Resources.Limits[corev1.ResourceName(sharedResource)]; !ok || q.Value() != 1 {
				t.Errorf("%s: limits %v, want %s: 1", name, c.Resources.Limits, sharedResource)
			}
			if c.SecurityContext == nil || c.SecurityContext.Capabilities == nil || !slices.Contains(c.SecurityContext.Capabilities.Add, "IPC_LOCK") {
				t.Errorf("%s: securityContext %+v, want IPC_LOCK added", name, c.SecurityContext)
			}
			waitRunning(t, exclusiveNS, "app="+name, 1, 3*time.Minute)
		}
		var host corev1.Pod
		if err := json.Unmarshal([]byte(kubectl(t, "-n", exclusiveNS, "get", "pod", "optin-host", "-o", "json")), &host); err != nil {
			t.Fatal(err)
		}
		if host.Spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
			t.Errorf("optin-host: dnsPolicy %q, want %s", host.Spec.DNSPolicy, corev1.DNSClusterFirstWithHostNet)
		}
		env := map[string]string{}
		for _, e := range host.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		if env["NCCL_SOCKET_IFNAME"] != cluster.UplinkDev {
			t.Errorf("optin-host: NCCL_SOCKET_IFNAME %q, want %s (its rdmanet.io/socket-ifname)", env["NCCL_SOCKET_IFNAME"], cluster.UplinkDev)
		}
		st := find(waitNetworkStatus(t, exclusiveNS, "optin-shared"), "net1")
		if st == nil || len(st.IPs) == 0 {
			t.Errorf("optin-shared: network-status has no net1 address")
		}
		if got := ipv4Of(t, exclusiveNS, "optin-shared", "net1"); len(got) == 0 {
			t.Errorf("optin-shared: net1 has no IPv4 address in the pod")
		}
		checkVerifyGood(t, bin, exclusiveNS, "optin-shared", "node-resource", "nad-exists", "nad-resource", "network-status", "exec",
			"training-interface", "default-route", "memlock", "cap-ipc-lock", "nccl-transport", "nccl-socket-ifname")
		checkVerifyGood(t, bin, exclusiveNS, "optin-host", "node-resource", "exec", "memlock", "cap-ipc-lock", "nccl-transport", "nccl-socket-ifname")
	})

	t.Run("webhook down: Fail refuses RDMA pods only, Ignore lets them through", func(t *testing.T) {
		kubectl(t, "-n", webhook.DefaultNamespace, "scale", "deployment/rdmanet-controller", "--replicas=0")
		defer func() {
			kubectl(t, "-n", webhook.DefaultNamespace, "scale", "deployment/rdmanet-controller", "--replicas=2")
			rollout(t, "deployment/rdmanet-controller")
		}()
		waitGone(t, webhook.DefaultNamespace, "app.kubernetes.io/name=rdmanet-controller", 2*time.Minute)
		rdmaPod := vfPod("while-down", exclusiveNS, true, "")
		plain := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: web-while-down, namespace: %s}\nspec:\n  containers: [{name: web, image: %s, imagePullPolicy: Never}]\n", exclusiveNS, cluster.TestboxImage)
		dryRun := func(manifest string) error {
			_, err := k.ApplyArgs(ctx(t, time.Minute), manifest, "--dry-run=server")
			return err
		}
		if err := dryRun(rdmaPod); err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
			t.Errorf("RDMA pod with the controller down and failurePolicy Fail: %v, want refused (failed calling webhook)", err)
		}
		if err := dryRun(plain); err != nil {
			t.Errorf("plain pod with the controller down: %v, want admitted (not an RDMA candidate: never sent)", err)
		}
		patch := `[{"op":"replace","path":"/webhooks/0/failurePolicy","value":"%[1]s"},{"op":"replace","path":"/webhooks/1/failurePolicy","value":"%[1]s"}]`
		kubectl(t, "patch", "validatingwebhookconfiguration", webhook.DefaultConfigurationName, "--type=json", "-p", fmt.Sprintf(patch, "Ignore"))
		defer kubectl(t, "patch", "validatingwebhookconfiguration", webhook.DefaultConfigurationName, "--type=json", "-p", fmt.Sprintf(patch, "Fail"))
		deadline := time.Now().Add(30 * time.Second) // the API server reloads configurations asynchronously
		for {
			err := dryRun(rdmaPod)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("RDMA pod with the controller down and failurePolicy Ignore: %v, want admitted", err)
			}
			time.Sleep(time.Second)
		}
	})
}

// checkVerifyGood runs kubectl rdma verify on a good pod: the checks named
// are ok, and the only problems are the kernel RDMA subsystem's (this
// machine has none: rdma-device).
func checkVerifyGood(t *testing.T, bin, ns, pod string, ok ...string) {
	t.Helper()
	rep, code := verifyPod(t, bin, ns, pod)
	for _, c := range ok {
		if got := rep.status(c); got != "ok" {
			t.Errorf("%s: check %s: %s (%s), want ok", pod, c, got, rep.evidence(c))
		}
	}
	for _, p := range rep.Pods {
		for _, c := range p.Checks {
			if c.Status == "problem" && c.Check != "rdma-device" {
				t.Errorf("%s: check %s: problem (%s); only rdma-device may fail on a kernel without an RDMA subsystem", pod, c.Check, c.Evidence)
			}
		}
	}
	if got := rep.status("rdma-device"); got != "problem" {
		t.Errorf("%s: check rdma-device: %s (%s), want problem on a kernel without an RDMA subsystem", pod, got, rep.evidence("rdma-device"))
	}
	if code != 1 {
		t.Errorf("%s: exit %d, want 1 (the rdma-device problem)", pod, code)
	}
}

// leaseHolder is the pod holding rdmanet-controller's leader Lease.
func leaseHolder(t *testing.T) string {
	t.Helper()
	h := kubectl(t, "-n", webhook.DefaultNamespace, "get", "lease", "rdmanet-controller", "-o", "jsonpath={.spec.holderIdentity}")
	pod, _, _ := strings.Cut(strings.TrimSpace(h), "_") // controller-runtime: <hostname>_<uuid>
	return pod
}

func rollout(t *testing.T, what string) {
	t.Helper()
	if _, err := k.Output(ctx(t, 4*time.Minute), "-n", webhook.DefaultNamespace, "rollout", "status", what, "--timeout=180s"); err != nil {
		out, _ := k.Output(ctx(t, time.Minute), "-n", webhook.DefaultNamespace, "get", "pods", "-o", "wide")
		t.Fatalf("%v\n%s", err, out)
	}
}

func waitNodeLabel(t *testing.T, key, want string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		var n corev1.Node
		if err := json.Unmarshal([]byte(kubectl(t, "get", "node", cluster.NodeName, "-o", "json")), &n); err != nil {
			t.Fatal(err)
		}
		if n.Labels[key] == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s: label %s=%q (annotation %q), want %q after %s", cluster.NodeName, key, n.Labels[key], n.Annotations[key], want, limit)
		}
		time.Sleep(time.Second)
	}
}

// optInPod is a pod that asks for the seed's exclusive network with one
// annotation and nothing else of RDMA; socketIfname, when set, is a
// user-set NCCL_SOCKET_IFNAME (never overridden by the webhook).
func optInPod(name, ns, socketIfname string) string {
	env := ""
	if socketIfname != "" {
		env = fmt.Sprintf("\n      env: [{name: NCCL_SOCKET_IFNAME, value: %q}]", socketIfname)
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
  namespace: %[2]s
  labels: {app: %[1]s}
  annotations: {rdmanet.io/network: %[2]s/face-training-rdma}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: trainer
      image: %[3]s
      imagePullPolicy: Never
      command: ["sh", "-c", "trap 'exit 0' TERM; sleep infinity & wait"]%[4]s
`, name, ns, cluster.TestboxImage, env)
}

// vfPod requests a VF the Multus way, without opting in: with the seed
// NAD's network on net1 unless ns is "" (then in exclusiveNS without any
// network: no net1), IPC_LOCK when ipcLock, NCCL_SOCKET_IFNAME (default
// "=net1").
func vfPod(name, ns string, ipcLock bool, socketIfname string) string {
	ann := "\n  annotations: {k8s.v1.cni.cncf.io/networks: face-training-rdma}"
	if ns == "" {
		ns, ann = exclusiveNS, ""
	}
	if socketIfname == "" {
		socketIfname = "=net1"
	}
	sc := ""
	if ipcLock {
		sc = "\n      securityContext: {capabilities: {add: [IPC_LOCK]}}"
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
  namespace: %[2]s
  labels: {app: %[1]s}%[3]s
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: trainer
      image: %[4]s
      imagePullPolicy: Never
      command: ["sh", "-c", "trap 'exit 0' TERM; sleep infinity & wait"]
      env: [{name: NCCL_SOCKET_IFNAME, value: %[5]q}]
      resources: {limits: {%[6]s: "1"}}%[7]s
`, name, ns, ann, cluster.TestboxImage, socketIfname, vfResource, sc)
}

// checkMutated: what the webhook gives an exclusive opt-in pod.
func checkMutated(t *testing.T, p *corev1.Pod) {
	t.Helper()
	if nets := p.Annotations["k8s.v1.cni.cncf.io/networks"]; !strings.Contains(nets, "face-training-rdma") {
		t.Errorf("networks annotation %q does not name face-training-rdma", nets)
	}
	c := p.Spec.Containers[0]
	if q, ok := c.Resources.Limits[corev1.ResourceName(vfResource)]; !ok || q.Value() != 1 {
		t.Errorf("limits %v: want %s: 1 (the NAD's resourceName)", c.Resources.Limits, vfResource)
	}
	if c.SecurityContext == nil || c.SecurityContext.Capabilities == nil || !slices.Contains(c.SecurityContext.Capabilities.Add, "IPC_LOCK") {
		t.Errorf("securityContext %+v: want IPC_LOCK added", c.SecurityContext)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env["NCCL_SOCKET_IFNAME"] != "=net1" || env["NCCL_IB_DISABLE"] != "0" {
		t.Errorf("env %v: want NCCL_SOCKET_IFNAME==net1 and NCCL_IB_DISABLE=0", env)
	}
	aff := p.Spec.Affinity
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil ||
		!strings.Contains(fmt.Sprint(aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution), webhook.NodeLabelNetnsMode) {
		t.Errorf("affinity %+v: want a required term on %s", aff, webhook.NodeLabelNetnsMode)
	}
}

// buildKubectlRDMA builds this checkout's kubectl-rdma.
func buildKubectlRDMA(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kubectl-rdma")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/kubectl-rdma")
	cmd.Dir = layout.Repo
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/kubectl-rdma: %v\n%s", err, out)
	}
	return bin
}

type verifyReport struct {
	Pods []struct {
		Checks []struct {
			Check, Status, Evidence string
		} `json:"checks"`
	} `json:"pods"`
}

func (r verifyReport) find(check string) (status, evidence string) {
	for _, p := range r.Pods {
		for _, c := range p.Checks {
			if c.Check == check {
				return c.Status, c.Evidence
			}
		}
	}
	return "absent", ""
}

func (r verifyReport) status(check string) string   { s, _ := r.find(check); return s }
func (r verifyReport) evidence(check string) string { _, e := r.find(check); return e }

// verifyPod runs kubectl rdma verify -o json on one pod.
func verifyPod(t *testing.T, bin, ns, pod string) (verifyReport, int) {
	t.Helper()
	cmd := exec.CommandContext(ctx(t, 3*time.Minute), bin, "verify", pod, "-n", ns, "-o", "json", "--kubeconfig", state.Kubeconfig)
	out, err := cmd.Output()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("kubectl rdma verify: %v", err)
	}
	var rep verifyReport
	if err := json.Unmarshal(out, &rep); err != nil || len(rep.Pods) != 1 {
		t.Fatalf("kubectl rdma verify %s/%s -o json (exit %d): %v\n%s", ns, pod, code, err, out)
	}
	t.Logf("kubectl rdma verify %s/%s: exit %d\n%s", ns, pod, code, out)
	return rep, code
}
