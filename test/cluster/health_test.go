//go:build clustertest

package cluster_test

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
	"github.com/rdmanet/rdmanet/test/cluster"
)

// TestClusterHealth (make test-cluster-health, one node): device health in
// the pod's status (KEP-4680). A DRA pod holds a VF of the exclusive pool;
// its PF loses carrier (the PF stand-in's fabric peer goes down and the
// fixture's sysfs says so, as the kernel would): kubelet shows the pod's
// device Unhealthy, with an Event on the pod; the link comes back: Healthy.
func TestClusterHealth(t *testing.T) {
	const ns = "health"
	n := state.Nodes[0]
	kubectl(t, "create", "ns", ns)
	cleanupNamespace(t, ns)
	if err := k.Apply(ctx(t, time.Minute), draPods(t, ns, "health-0")); err != nil {
		t.Fatal(err)
	}
	p := waitRunning(t, ns, "app="+ns, 1, 4*time.Minute)[0]
	vf, _ := checkExclusive(t, ns, p.Name, nil)
	t.Logf("%s on VF %s; its PF %s", p.Name, vf, cluster.ExclusivePF)

	fixture := &sysfsfixture.Node{Root: layout.NodeSysfs(n)}
	peer := cluster.FabricPort(n, "expf")
	setPF := func(state string) {
		t.Helper()
		if out, err := exec.Command("ip", "-n", cluster.WireNetns, "link", "set", peer, state).CombinedOutput(); err != nil {
			t.Fatalf("ip link set %s %s: %v: %s", peer, state, err, out)
		}
		if err := fixture.SetOperState(cluster.ExclusivePF, state); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { setPF("up") })

	for _, step := range []struct {
		link  string
		want  corev1.ResourceHealthStatus
		event string
	}{
		{"down", corev1.ResourceHealthStatusUnhealthy, "RDMADeviceUnhealthy"},
		{"up", corev1.ResourceHealthStatusHealthy, "RDMADeviceHealthy"},
	} {
		start := time.Now()
		setPF(step.link)
		got := waitDeviceHealth(t, ns, p.Name, step.want, 90*time.Second)
		t.Logf("PF %s %s: pod status says %s %.1fs later (%s)", cluster.ExclusivePF, step.link, step.want, time.Since(start).Seconds(), got)
		waitEvent(t, ns, p.Name, step.event, time.Minute)
	}
}

// waitDeviceHealth waits until one of the pod's allocated resources has
// health want in its container status; it returns that entry.
func waitDeviceHealth(t *testing.T, ns, pod string, want corev1.ResourceHealthStatus, limit time.Duration) string {
	t.Helper()
	var last []corev1.ResourceStatus
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		var p corev1.Pod
		if err := json.Unmarshal([]byte(kubectl(t, "-n", ns, "get", "pod", pod, "-o", "json")), &p); err != nil {
			t.Fatal(err)
		}
		last = nil
		for _, c := range p.Status.ContainerStatuses {
			last = append(last, c.AllocatedResourcesStatus...)
			for _, rs := range c.AllocatedResourcesStatus {
				for _, r := range rs.Resources {
					if r.Health == want {
						msg := ""
						if r.Message != nil {
							msg = *r.Message
						}
						return fmt.Sprintf("%s %s: %s", rs.Name, r.ResourceID, msg)
					}
				}
			}
		}
	}
	t.Fatalf("%s/%s: no allocated resource %s after %s; allocatedResourcesStatus: %+v", ns, pod, want, limit, last)
	return ""
}

// waitEvent waits for an Event of reason on the pod.
func waitEvent(t *testing.T, ns, pod, reason string, limit time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(time.Second) {
		out, _ := k.Output(ctx(t, 30*time.Second), "-n", ns, "get", "events", "--field-selector",
			"involvedObject.name="+pod+",reason="+reason, "-o", "name")
		if strings.TrimSpace(out) != "" {
			return
		}
	}
	t.Errorf("%s/%s: no Event %s after %s", ns, pod, reason, limit)
}
