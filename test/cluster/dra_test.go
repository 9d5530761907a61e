//go:build clustertest

package cluster_test

import (
	"bytes"
	"encoding/json"
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
	nad, err := os.ReadFile(repoPath("examples/cluster/exclusive/nad.yaml"))
	if err != nil {
		t.Fatal(err)
	}
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
	tmpl := `apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: face-rdma, namespace: ` + draNS + `}
spec:
  spec:
    devices:
      requests:
        - name: nic
          exactly: {deviceClassName: ` + draClass + `}
`
	out := strings.Join([]string{
		strings.ReplaceAll(string(nad), "namespace: "+exclusiveNS, "namespace: "+draNS),
		strings.ReplaceAll(string(docs[0]), "namespace: "+exclusiveNS, "namespace: "+draNS),
		tmpl, string(jb)}, "\n---\n")
	return out
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
		claim := checkClaimStatus(t, p.Name, devName, ip)
		env, err := execIn(t, draNS, p.Name, "env")
		if err != nil {
			t.Fatalf("env in %s: %v", key, err)
		}
		if want := "PCIDEVICE_EXAMPLE_COM_SRIOV_RDMA=" + vf; !strings.Contains(env, want+"\n") {
			t.Errorf("%s: container env lacks %s (from the claim's CDI spec):\n%s", key, want, env)
		}
		if !strings.Contains(env, "NCCL_SOCKET_IFNAME==net1\n") {
			t.Errorf("%s: the seed's NCCL_SOCKET_IFNAME was not kept:\n%s", key, env)
		}
		devs, err := execIn(t, draNS, p.Name, "ls", "/dev/infiniband")
		if err != nil || !strings.Contains(devs, "uverbs") {
			t.Errorf("%s: /dev/infiniband in the container = %q (%v), want the VF's uverbs node from the CDI spec", key, devs, err)
		}
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

// checkClaimStatus: the pod's claim is allocated the VF that is on net1,
// and its status.devices[] entry tells the interface and address (the meta
// CNI writes it right after ADD). Returns the claim's UID.
func checkClaimStatus(t *testing.T, pod, devName, ip string) string {
	t.Helper()
	name := trim(kubectl(t, "-n", draNS, "get", "pod", pod, "-o", "jsonpath={.status.resourceClaimStatuses[0].resourceClaimName}"))
	if name == "" {
		t.Fatalf("pod %s/%s has no resourceClaimStatuses", draNS, pod)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var c resourcev1.ResourceClaim
		if err := json.Unmarshal([]byte(kubectl(t, "-n", draNS, "get", "resourceclaim", name, "-o", "json")), &c); err != nil {
			t.Fatal(err)
		}
		if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != 1 || c.Status.Allocation.Devices.Results[0].Device != devName {
			t.Fatalf("claim %s/%s allocation %+v, want the one device %s that is on net1", draNS, name, c.Status.Allocation, devName)
		}
		for _, d := range c.Status.Devices {
			if d.Device == devName && d.NetworkData != nil && d.NetworkData.InterfaceName == "net1" &&
				slices.ContainsFunc(d.NetworkData.IPs, func(s string) bool { return strings.HasPrefix(s, ip+"/") }) && d.NetworkData.HardwareAddress != "" {
				return string(c.UID)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("claim %s/%s status.devices %+v: want networkData net1 with %s and a MAC", draNS, name, c.Status.Devices, ip)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
