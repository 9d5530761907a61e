//go:build clustertest

package cluster_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
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

// testController: rdmanet-controller (deploy/controller, this checkout's
// image) on the real node: its admission webhooks called by the real
// kube-apiserver through the controller's Service, the node label it
// mirrors from the agent's annotation, opt-in pods mutated and Running with
// net1, wrong pods refused with the rule and the fix, the address of a
// deleted pod free again, and kubectl rdma verify over the live pods.
// Installed for this scenario only and removed at its end (with
// failurePolicy Fail, the validating webhook sees every pod created
// meanwhile).
func testController(t *testing.T) {
	installController(t)
	// The agent annotates the node with its RDMA netns mode; the controller
	// mirrors it into the label the webhook's node affinity needs.
	waitNodeLabel(t, webhook.NodeLabelNetnsMode, "exclusive", 2*time.Minute)
	applyExample(t, exclusiveNS, "examples/cluster/exclusive/nad.yaml")

	const pod = "optin-exclusive"
	var ip string
	t.Run("opt-in exclusive pod is mutated and Running with net1", func(t *testing.T) {
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
	})

	t.Run("pods breaking an error rule are refused with the rule and the fix", func(t *testing.T) {
		tests := []struct {
			name, manifest string
			want           []string
		}{
			{name: "VF pod without IPC_LOCK", manifest: vfPodWithoutIPCLock("no-ipc-lock", exclusiveNS),
				want: []string{"RDMA060", "IPC_LOCK", "fix:"}},
			{name: "opt-in pod whose NCCL_SOCKET_IFNAME names no interface it has", manifest: optInPod("bad-ifname", exclusiveNS, "eth1"),
				want: []string{"RDMA073", "NCCL_SOCKET_IFNAME", "fix:"}},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				err := k.Apply(ctx(t, time.Minute), tc.manifest)
				if err == nil {
					kubectl(t, "-n", exclusiveNS, "delete", "pod", "--ignore-not-found", "--wait=false", "no-ipc-lock", "bad-ifname")
					t.Fatal("the API server admitted the pod")
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("denial does not contain %q: %v", w, err)
					}
				}
			})
		}
	})

	t.Run("kubectl rdma verify", func(t *testing.T) {
		if ip == "" {
			t.Skip("no opt-in pod Running (see above)")
		}
		bin := buildKubectlRDMA(t)
		rep, code := verifyPod(t, bin, exclusiveNS, pod)
		// Every layer this machine can provide is OK; the kernel RDMA
		// checks cannot be (no RDMA subsystem: no /sys/class/infiniband,
		// no GID table in the pod), so verify exits 1 naming them.
		for _, c := range []string{"node-resource", "nad-exists", "nad-resource", "network-status", "device-info", "exec",
			"training-interface", "default-route", "dev-infiniband", "memlock", "cap-ipc-lock", "nccl-transport", "nccl-socket-ifname"} {
			if got := rep.status(c); got != "ok" {
				t.Errorf("check %s: %s (%s), want ok", c, got, rep.evidence(c))
			}
		}
		if got := rep.status("rdma-device"); got != "problem" {
			t.Errorf("check rdma-device: %s (%s), want problem on a kernel without an RDMA subsystem", got, rep.evidence("rdma-device"))
		}
		if code != 1 {
			t.Errorf("exit %d, want 1 (a problem found)", code)
		}
		// The NAD deleted after the pod started: a restart would fail.
		kubectl(t, "delete", "-f", repoPath("examples/cluster/exclusive/nad.yaml"))
		rep, code = verifyPod(t, bin, exclusiveNS, pod)
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

	t.Run("opt-in shared and host pods are mutated and Running", func(t *testing.T) {
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
	})
}

// installController applies deploy/controller with this checkout's image
// and waits until both replicas are ready and the webhook configurations
// carry the controller's CA; the cleanup removes it all and checks the
// webhook configurations are gone.
func installController(t *testing.T) {
	t.Helper()
	dir := filepath.Join(layout.Dir, "controller-overlay")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(dir, repoPath("deploy/controller"))
	if err != nil {
		t.Fatal(err)
	}
	name, tag, _ := strings.Cut(state.Image, ":")
	kust := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - %s\nimages:\n  - name: rdmanet/rdmanet\n    newName: %s\n    newTag: %s\n", rel, name, tag)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kust), 0o644); err != nil {
		t.Fatal(err)
	}
	kubectl(t, "apply", "-k", dir)
	t.Cleanup(func() {
		if _, err := k.Output(ctx(t, 3*time.Minute), "delete", "-k", dir, "--ignore-not-found", "--wait", "--timeout=120s"); err != nil {
			t.Errorf("removing rdmanet-controller: %v", err)
		}
		for _, kind := range []string{"mutatingwebhookconfiguration", "validatingwebhookconfiguration"} {
			if out, _ := k.Output(ctx(t, time.Minute), "get", kind, webhook.DefaultConfigurationName, "--ignore-not-found", "-o", "name"); strings.TrimSpace(out) != "" {
				t.Errorf("%s left after kubectl delete -k deploy/controller", out)
			}
		}
		// The Secret the controller created for its certificates is its own
		// object, not the manifests': it goes with the namespace.
		_, _ = k.Output(ctx(t, time.Minute), "-n", webhook.DefaultNamespace, "delete", "secret", webhook.DefaultSecretName, "--ignore-not-found")
	})
	if _, err := k.Output(ctx(t, 4*time.Minute), "-n", webhook.DefaultNamespace, "rollout", "status", "deployment/rdmanet-controller", "--timeout=180s"); err != nil {
		out, _ := k.Output(ctx(t, time.Minute), "-n", webhook.DefaultNamespace, "get", "pods", "-o", "wide")
		logs, _ := k.Output(ctx(t, time.Minute), "-n", webhook.DefaultNamespace, "logs", "deployment/rdmanet-controller", "--tail=40")
		t.Fatalf("%v\n%s\n%s", err, out, logs)
	}
	for _, kind := range []string{"mutatingwebhookconfiguration", "validatingwebhookconfiguration"} {
		deadline := time.Now().Add(time.Minute)
		for {
			ca := kubectl(t, "get", kind, webhook.DefaultConfigurationName, "-o", "jsonpath={.webhooks[0].clientConfig.caBundle}")
			if ca != "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s %s has no caBundle a minute after the controller is ready", kind, webhook.DefaultConfigurationName)
			}
			time.Sleep(time.Second)
		}
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

// vfPodWithoutIPCLock attaches a VF the Multus way, without opting in and
// without IPC_LOCK (RDMA060 is an error: memory registration fails).
func vfPodWithoutIPCLock(name, ns string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
  namespace: %[2]s
  annotations: {k8s.v1.cni.cncf.io/networks: face-training-rdma}
spec:
  containers:
    - name: trainer
      image: %[3]s
      imagePullPolicy: Never
      command: ["sleep", "infinity"]
      env: [{name: NCCL_SOCKET_IFNAME, value: "=net1"}]
      resources: {limits: {%[4]s: "1"}}
`, name, ns, cluster.TestboxImage, vfResource)
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
