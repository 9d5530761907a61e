//go:build clustertest

package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"sigs.k8s.io/yaml"

	"github.com/rdmanet/rdmanet/internal/dra"
	"github.com/rdmanet/rdmanet/test/cluster"
)

const (
	draNS  = "ai-training-dra"
	draSel = "app=face-trainer"
	// draClass is deploy/dra's class for the seed's exclusive pool: it pins
	// the pool, so the claim's VF is one the NAD's resourceName names.
	draClass = "sriov-rdma.example.com"
)

// draSeedWorkload is the seed's exclusive workload on the DRA path: the
// seed's NAD unchanged, and its Service and Job (examples/cluster/exclusive)
// with the VF asked for by a ResourceClaimTemplate instead of
// example.com/sriov_rdma in the limits — the only change a user makes to
// move a job from the device plugin to DRA. GPUs stay with the (fake) GPU
// device plugin: a node can migrate NICs before GPUs.
func draSeedWorkload(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(repoPath("examples/cluster/exclusive/job.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := bytes.Split(raw, []byte("\n---\n"))
	if len(docs) != 2 {
		t.Fatalf("examples/cluster/exclusive/job.yaml: %d documents, want the Service and the Job", len(docs))
	}
	var job batchv1.Job
	if err := yaml.UnmarshalStrict(docs[1], &job); err != nil {
		t.Fatal(err)
	}
	job.Namespace = draNS
	spec := &job.Spec.Template.Spec
	spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "rdma", ResourceClaimTemplateName: ptrTo("face-rdma")}}
	c := &spec.Containers[0]
	delete(c.Resources.Limits, vfResource)
	delete(c.Resources.Requests, vfResource)
	c.Resources.Claims = []corev1.ResourceClaim{{Name: "rdma"}}
	for i := range c.Env {
		c.Env[i].Value = strings.ReplaceAll(c.Env[i].Value, "."+exclusiveNS+".", "."+draNS+".")
	}
	jb, err := yaml.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	out := strings.Join([]string{
		seedNADIn(t, draNS),
		strings.ReplaceAll(string(docs[0]), "namespace: "+exclusiveNS, "namespace: "+draNS),
		vfTemplate(draNS, "face-rdma"), string(jb)}, "\n---\n")
	return out
}

// seedNADIn is the seed's exclusive NAD (examples/cluster) moved into ns.
func seedNADIn(t *testing.T, ns string) string {
	t.Helper()
	nad, err := os.ReadFile(repoPath("examples/cluster/exclusive/nad.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(nad), "namespace: "+exclusiveNS, "namespace: "+ns)
}

// vfTemplate is a ResourceClaimTemplate ns/name for one VF of the seed's
// pool (request "nic", class draClass).
func vfTemplate(ns, name string) string {
	return `apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: ` + name + `, namespace: ` + ns + `}
spec:
  spec:
    devices:
      requests:
        - name: nic
          exactly: {deviceClassName: ` + draClass + `}
`
}

func ptrTo[T any](v T) *T { return &v }

// testDRA: the seed's exclusive workload through rdmanet's DRA driver on the
// real kubelet and containerd: the agent (--dra, deploy/components/dra)
// publishes the VFs, kube-scheduler allocates one per pod from the claim
// template, kubelet has the agent's kubelet plugin prepare it (CDI: device
// nodes and PCIDEVICE_ env), the meta CNI finds the claim's VF through
// kubelet's PodResources and attaches it as net1 through sriov → rdma →
// IPAM, and writes the claim's networkData; deleting the Job gives
// everything back.
func testDRA(t *testing.T) {
	slicesJSON := kubectl(t, "get", "resourceslices", "--field-selector", "spec.driver="+dra.DriverName, "-o", "json")
	var sl resourcev1.ResourceSliceList
	if err := json.Unmarshal([]byte(slicesJSON), &sl); err != nil {
		t.Fatal(err)
	}
	var vfs int
	for _, s := range sl.Items {
		for _, d := range s.Spec.Devices {
			if strings.HasPrefix(d.Name, "vf-") {
				vfs++
			}
		}
	}
	if vfs != cluster.NumVFs {
		t.Fatalf("rdmanet's ResourceSlices publish %d VFs, the node has %d", vfs, cluster.NumVFs)
	}

	kubectl(t, "create", "ns", draNS)
	cleanupNamespace(t, draNS)
	start := time.Now()
	if err := k.Apply(ctx(t, time.Minute), draSeedWorkload(t)); err != nil {
		t.Fatal(err)
	}
	ps := waitRunning(t, draNS, draSel, 2, 4*time.Minute)
	t.Logf("2 DRA pods Running %.1fs after apply", time.Since(start).Seconds())
	res := podResources(t)
	seen := map[string]string{}
	for _, p := range ps {
		vf, ip := checkExclusive(t, draNS, p.Name, nil)
		if other, dup := seen[vf]; dup {
			t.Errorf("VF %s in two pods: %s and %s", vf, other, p.Name)
		}
		seen[vf] = p.Name
		key := draNS + "/" + p.Name
		if len(res[key][vfResource]) != 0 {
			t.Errorf("%s: kubelet reports device-plugin VFs %v for a DRA pod", key, res[key][vfResource])
		}
		devName := "vf-" + strings.NewReplacer(":", "-", ".", "-").Replace(vf)
		if got := res[key]["dra:"+dra.DriverName]; !slices.Equal(got, []string{devName}) {
			t.Errorf("%s: kubelet's PodResources DRA devices %v, want [%s] (the VF on net1)", key, got, devName)
		}
		if gpus := res[key]["nvidia.com/gpu"]; len(gpus) != 8 {
			t.Errorf("%s: kubelet allocated %d GPUs, the seed asks 8", key, len(gpus))
		}
		claimName := trim(kubectl(t, "-n", draNS, "get", "pod", p.Name, "-o", "jsonpath={.status.resourceClaimStatuses[0].resourceClaimName}"))
		claim := checkClaimStatus(t, draNS, claimName, devName, ip)
		checkPrepared(t, draNS, p.Name, vf)
		spec := filepath.Join(layout.Dir, "node/run/cdi", dra.DriverName+"-claim_"+claim+".json")
		if _, err := os.Stat(spec); err != nil {
			t.Errorf("%s: CDI spec of claim %s: %v", key, claim, err)
		}
	}
	t.Logf("DRA pods: VFs %v", seen)

	kubectl(t, "-n", draNS, "delete", "job", "face-trainer", "--wait", "--timeout=180s")
	waitGone(t, draNS, draSel, 3*time.Minute)
	deadline := time.Now().Add(90 * time.Second)
	for {
		var left []string
		if out, _ := k.Output(ctx(t, time.Minute), "-n", draNS, "get", "resourceclaims", "-o", "name"); strings.TrimSpace(out) != "" {
			left = append(left, "claims: "+strings.TrimSpace(out))
		}
		if specs, _ := filepath.Glob(filepath.Join(layout.Dir, "node/run/cdi", dra.DriverName+"-*")); len(specs) > 0 {
			left = append(left, "CDI specs: "+strings.Join(specs, " "))
		}
		for ip, pod := range ipamAllocations(t) {
			if strings.HasPrefix(pod, draNS+"/") {
				left = append(left, "address "+ip+" of "+pod)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("90 s after the DRA pods were deleted, still held: %v", left)
		}
		time.Sleep(time.Second)
	}
}

// checkPrepared: what the kubelet plugin's CDI spec gives the container
// (the device plugin's PCIDEVICE_ variable, NCCL_IB_HCA naming the VF's RDMA
// device exactly, the RoCE v2 GID index the VF's first IPv4 address gets,
// the VF's /dev/infiniband nodes), next to the seed's own env, kept.
func checkPrepared(t *testing.T, ns, pod, vf string) {
	t.Helper()
	key := ns + "/" + pod
	env, err := execIn(t, ns, pod, "env")
	if err != nil {
		t.Fatalf("env in %s: %v", key, err)
	}
	rdmaDev := ""
	if st := find(waitNetworkStatus(t, ns, pod), "net1"); st != nil && st.DeviceInfo != nil && st.DeviceInfo.PCI != nil {
		rdmaDev = st.DeviceInfo.PCI.RDMADevice
	}
	for _, want := range []string{"PCIDEVICE_EXAMPLE_COM_SRIOV_RDMA=" + vf, "NCCL_IB_HCA==" + rdmaDev, "NCCL_IB_GID_INDEX=3", "NCCL_SOCKET_IFNAME==net1"} {
		if !strings.Contains(env, want+"\n") {
			t.Errorf("%s: container env lacks %s (CDI spec of the claim; NCCL_SOCKET_IFNAME the seed's own):\n%s", key, want, env)
		}
	}
	devs, err := execIn(t, ns, pod, "ls", "/dev/infiniband")
	if err != nil || !strings.Contains(devs, "uverbs") {
		t.Errorf("%s: /dev/infiniband in the container = %q (%v), want the VF's uverbs node from the CDI spec", key, devs, err)
	}
}

// checkClaimStatus: claim ns/name is allocated the VF that is on net1,
// and its status.devices[] entry tells the interface and address (the meta
// CNI writes it right after ADD). Returns the claim's UID.
func checkClaimStatus(t *testing.T, ns, name, devName, ip string) string {
	t.Helper()
	if name == "" {
		t.Fatalf("no claim name (pod status names none) for device %s", devName)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var c resourcev1.ResourceClaim
		if err := json.Unmarshal([]byte(kubectl(t, "-n", ns, "get", "resourceclaim", name, "-o", "json")), &c); err != nil {
			t.Fatal(err)
		}
		if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != 1 || c.Status.Allocation.Devices.Results[0].Device != devName {
			t.Fatalf("claim %s/%s allocation %+v, want the one device %s that is on net1", ns, name, c.Status.Allocation, devName)
		}
		for _, d := range c.Status.Devices {
			if d.Device == devName && d.NetworkData != nil && d.NetworkData.InterfaceName == "net1" &&
				slices.ContainsFunc(d.NetworkData.IPs, func(s string) bool { return strings.HasPrefix(s, ip+"/") }) && d.NetworkData.HardwareAddress != "" {
				return string(c.UID)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("claim %s/%s status.devices %+v: want networkData net1 with %s and a MAC", ns, name, c.Status.Devices, ip)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// testDRAOnly: a node moved to DRA (the agent with --device-plugin=false)
// runs the seed's exclusive Job without a changed line: kubelet reports
// example.com/sriov_rdma with 0 allocatable, kube-scheduler serves the
// pods' example.com/sriov_rdma: 1 from deploy/dra's class with that
// extendedResourceName (a claim it creates per pod), and net1, env and
// device nodes are as on the device plugin path. The agent goes back to
// the device plugin afterwards.
func testDRAOnly(t *testing.T) {
	setAgentFlag(t, "--device-plugin=false", vfResource, fmt.Sprint(cluster.NumVFs))
	waitAllocatable(t, vfResource, "0")
	applyExample(t, exclusiveNS, exclusiveFiles...)
	ps := waitRunning(t, exclusiveNS, exclusiveSel, 2, 4*time.Minute)
	res := podResources(t)
	for _, p := range ps {
		vf, ip := checkExclusive(t, exclusiveNS, p.Name, nil)
		key := exclusiveNS + "/" + p.Name
		devName := "vf-" + strings.NewReplacer(":", "-", ".", "-").Replace(vf)
		if len(res[key][vfResource]) != 0 {
			t.Errorf("%s: kubelet reports device-plugin VFs %v on a DRA-only node", key, res[key][vfResource])
		}
		if got := res[key]["dra:"+dra.DriverName]; !slices.Equal(got, []string{devName}) {
			t.Errorf("%s: kubelet's PodResources DRA devices %v, want [%s] (the VF on net1)", key, got, devName)
		}
		claim := trim(kubectl(t, "-n", exclusiveNS, "get", "pod", p.Name, "-o", "jsonpath={.status.extendedResourceClaimStatus.resourceClaimName}"))
		checkClaimStatus(t, exclusiveNS, claim, devName, ip)
		checkPrepared(t, exclusiveNS, p.Name, vf)
	}
	deleteExample(t, exclusiveFiles...)
	waitGone(t, exclusiveNS, exclusiveSel, 3*time.Minute)
}

// setAgentFlag adds flag to the agent's arguments (a DaemonSet roll) and
// removes it again when the test ends, then waits for the node's
// allocatable res to be back at want.
func setAgentFlag(t *testing.T, flag, res, want string) {
	t.Helper()
	ci, _ := agentModeArg(t)
	t.Cleanup(func() {
		args := strings.Fields(kubectl(t, "-n", "rdmanet-system", "get", "daemonset", "rdmanet-node", "-o",
			fmt.Sprintf(`jsonpath={.spec.template.spec.containers[%d].args[*]}`, ci)))
		if i := slices.Index(args, flag); i >= 0 {
			_, _ = k.Output(context.Background(), "-n", "rdmanet-system", "patch", "daemonset", "rdmanet-node", "--type=json",
				"-p", fmt.Sprintf(`[{"op": "remove", "path": "/spec/template/spec/containers/%d/args/%d"}]`, ci, i))
			_, _ = k.Output(context.Background(), "-n", "rdmanet-system", "rollout", "status", "daemonset/rdmanet-node", "--timeout=300s")
		}
		waitAllocatable(t, res, want)
	})
	kubectl(t, "-n", "rdmanet-system", "patch", "daemonset", "rdmanet-node", "--type=json",
		"-p", fmt.Sprintf(`[{"op": "add", "path": "/spec/template/spec/containers/%d/args/-", "value": %q}]`, ci, flag))
	kubectl(t, "-n", "rdmanet-system", "rollout", "status", "daemonset/rdmanet-node", "--timeout=300s")
}

// waitAllocatable waits until the node's allocatable res is want.
func waitAllocatable(t *testing.T, res, want string) {
	t.Helper()
	waitAllocatableOn(t, cluster.NodeName, res, want)
}

// draPods is the seed NAD in ns, a ResourceClaimTemplate for one VF of the
// seed's pool, and one pod per name using it (label app=ns).
func draPods(t *testing.T, ns string, names ...string) string {
	t.Helper()
	docs := []string{seedNADIn(t, ns), vfTemplate(ns, "vf")}
	for _, n := range names {
		docs = append(docs, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
  namespace: %[2]s
  labels: {app: %[2]s}
  annotations: {k8s.v1.cni.cncf.io/networks: '[{"name": "face-training-rdma", "interface": "net1"}]'}
spec:
  terminationGracePeriodSeconds: 1
  resourceClaims: [{name: vf, resourceClaimTemplateName: vf}]
  containers:
    - name: c
      image: %[3]s
      imagePullPolicy: Never
      command: ["sh", "-c", "trap 'exit 0' TERM; sleep infinity & wait"]
      env: [{name: NCCL_SOCKET_IFNAME, value: "=net1"}]
      securityContext: {capabilities: {add: [IPC_LOCK]}}
      resources: {claims: [{name: vf}]}
`, n, ns, cluster.TestboxImage))
	}
	return strings.Join(docs, "\n---\n")
}

// draCheckpointClaims is how many claims the kubelet plugin's checkpoint
// records.
func draCheckpointClaims(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(layout.Dir, "node/var/lib/kubelet/plugins", dra.DriverName, dra.CheckpointFile))
	if err != nil {
		t.Fatalf("the kubelet plugin's checkpoint: %v", err)
	}
	var cp struct {
		Claims map[string]json.RawMessage `json:"claims"`
	}
	if err := json.Unmarshal(b, &cp); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	return len(cp.Claims)
}

// testDRARestart: pods with prepared claims ride out an agent restart (the
// DaemonSet's pod deleted: the kubelet plugin registers again from its
// checkpoint) and a kubelet restart: the pods keep their containers, VFs
// and addresses; kubelet still lists their claims' VFs; a new claim gets
// a VF none of them holds; deleting the pods unprepares every claim (CDI
// specs gone, checkpoint empty) and gives the addresses back.
func testDRARestart(t *testing.T) {
	const ns = "dra-restart"
	applyExample(t, ns)
	if err := k.Apply(ctx(t, time.Minute), draPods(t, ns, "a", "b")); err != nil {
		t.Fatal(err)
	}
	ps := waitRunning(t, ns, "app="+ns, 2, 3*time.Minute)
	type seen struct{ vf, ip, cid string }
	before := map[string]seen{}
	for _, p := range ps {
		vf, ip := checkExclusive(t, ns, p.Name, nil)
		before[p.Name] = seen{vf, ip, p.Status.ContainerStatuses[0].ContainerID}
	}
	if n := draCheckpointClaims(t); n != 2 {
		t.Fatalf("checkpoint records %d claims, want 2", n)
	}
	check := func(after string) {
		t.Helper()
		// kubelet re-prepares the claims of running pods after it starts
		// (its claim cache comes back from its checkpoint unprepared) and
		// PodResources lists their devices again once the driver has
		// answered: wait for that, and say how long it took.
		start := time.Now()
		var res map[string]map[string][]string
		for {
			res = podResources(t)
			listed := 0
			for name := range before {
				if len(res[ns+"/"+name]["dra:"+dra.DriverName]) > 0 {
					listed++
				}
			}
			if listed == len(before) || time.Since(start) > 60*time.Second {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		t.Logf("after the %s: kubelet's PodResources lists the claims' VFs %.1fs after the node was Ready", after, time.Since(start).Seconds())
		for _, p := range waitRunning(t, ns, "app="+ns, 2, 2*time.Minute) {
			b := before[p.Name]
			if p.Status.ContainerStatuses[0].ContainerID != b.cid || p.Status.ContainerStatuses[0].RestartCount != 0 {
				t.Errorf("%s: container changed across the %s", p.Name, after)
			}
			if got := ipv4Of(t, ns, p.Name, "net1"); len(got) == 0 || !strings.HasPrefix(got[0], b.ip+"/") {
				t.Errorf("%s: net1 = %v after the %s, had %s", p.Name, got, after, b.ip)
			}
			devName := "vf-" + strings.NewReplacer(":", "-", ".", "-").Replace(b.vf)
			if got := res[ns+"/"+p.Name]["dra:"+dra.DriverName]; !slices.Equal(got, []string{devName}) {
				t.Errorf("%s: after the %s kubelet lists DRA devices %v, want [%s]", p.Name, after, got, devName)
			}
		}
	}
	kubectl(t, "-n", "rdmanet-system", "delete", "pod", "-l", "app.kubernetes.io/name=rdmanet-node", "--wait", "--timeout=120s")
	kubectl(t, "-n", "rdmanet-system", "rollout", "status", "daemonset/rdmanet-node", "--timeout=300s")
	check("agent restart")
	if err := cluster.NewControl(layout).Restart(ctx(t, 5*time.Minute), "kubelet"); err != nil {
		t.Fatalf("restart kubelet: %v", err)
	}
	kubectl(t, "wait", "--for=condition=Ready", "node/"+cluster.NodeName, "--timeout=180s")
	check("kubelet restart")

	// A new claim after both restarts gets a VF neither pod holds.
	if err := k.Apply(ctx(t, time.Minute), draPods(t, ns, "a", "b", "c")); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, ns, "app="+ns, 3, 3*time.Minute)
	vf, _ := checkExclusive(t, ns, "c", nil)
	for name, b := range before {
		if b.vf == vf {
			t.Errorf("new pod c got VF %s, which pod %s holds", vf, name)
		}
	}
	// kubectl rdma verify takes the claim for what it is: no false
	// problem for a VF that comes from a claim rather than the limits.
	rep, _ := verifyPod(t, buildKubectlRDMA(t), ns, "c")
	for _, c := range []string{"node-resource", "nad-exists", "nad-resource", "network-status", "device-info", "dev-infiniband", "cap-ipc-lock"} {
		if got := rep.status(c); got != "ok" {
			t.Errorf("kubectl rdma verify on DRA pod c: check %s: %s (%s), want ok", c, got, rep.evidence(c))
		}
	}

	kubectl(t, "delete", "ns", ns, "--wait", "--timeout=300s")
	deadline := time.Now().Add(90 * time.Second)
	for {
		specs, _ := filepath.Glob(filepath.Join(layout.Dir, "node/run/cdi", dra.DriverName+"-*"))
		n := draCheckpointClaims(t)
		var held []string
		for ip, pod := range ipamAllocations(t) {
			if strings.HasPrefix(pod, ns+"/") {
				held = append(held, ip)
			}
		}
		if len(specs) == 0 && n == 0 && len(held) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("90 s after the pods were deleted: CDI specs %v, checkpoint claims %d, addresses %v", specs, n, held)
		}
		time.Sleep(time.Second)
	}
}

// testSharedDRAOnly: the shared-mode seed workload, unchanged, on a node
// whose shared pool is served through DRA only: kube-scheduler allocates a
// share of the HCA (consumable capacity) through deploy/dra's class with
// extendedResourceName rdma/rdma_shared_device_eth, the kubelet plugin
// gives the HCA's device nodes, and net1 is the macvlan over its PF.
func testSharedDRAOnly(t *testing.T) {
	switchToShared(t)
	slots := trim(kubectl(t, "get", "node", cluster.NodeName, "-o", "jsonpath={.status.allocatable."+strings.ReplaceAll(sharedResource, ".", `\.`)+"}"))
	setAgentFlag(t, "--device-plugin=false", sharedResource, slots)
	waitAllocatable(t, sharedResource, "0")
	ns := sharedNamespace(t)
	applyExample(t, ns, sharedFiles...)
	ps := waitRunning(t, ns, "", sharedPods(t), 3*time.Minute)
	checkSharedNet1(t, ns, ps)
	res := podResources(t)
	for _, p := range ps {
		key := ns + "/" + p.Name
		if got := res[key]["dra:"+dra.DriverName]; len(got) != 1 || !strings.HasPrefix(got[0], "hca-") {
			t.Errorf("%s: kubelet's PodResources DRA devices %v, want the shared HCA", key, got)
		}
		if len(res[key][sharedResource]) != 0 {
			t.Errorf("%s: device-plugin slots %v on a DRA-only node", key, res[key][sharedResource])
		}
		claim := trim(kubectl(t, "-n", ns, "get", "pod", p.Name, "-o", "jsonpath={.status.extendedResourceClaimStatus.resourceClaimName}"))
		var c resourcev1.ResourceClaim
		if err := json.Unmarshal([]byte(kubectl(t, "-n", ns, "get", "resourceclaim", claim, "-o", "json")), &c); err != nil {
			t.Fatal(err)
		}
		if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != 1 || c.Status.Allocation.Devices.Results[0].ShareID == nil {
			t.Errorf("%s: claim %s allocation %+v, want one share of the HCA", key, claim, c.Status.Allocation)
		}
		devs, err := execIn(t, ns, p.Name, "ls", "/dev/infiniband")
		if err != nil || !strings.Contains(devs, "uverbs") {
			t.Errorf("%s: /dev/infiniband = %q (%v), want the HCA's uverbs node from the CDI spec", key, devs, err)
		}
	}
	deleteExample(t, sharedFiles...)
}
