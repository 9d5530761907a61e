//go:build clustertest

package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	podresources "k8s.io/kubelet/pkg/apis/podresources/v1"

	v1alpha1 "github.com/rdmanet/rdmanet/api/ipam/v1alpha1"
	"github.com/rdmanet/rdmanet/internal/devinfo"
	"github.com/rdmanet/rdmanet/test/cluster"
)

// pods returns the pods of a namespace matching a label selector.
func pods(t *testing.T, ns, selector string) []corev1.Pod {
	t.Helper()
	args := []string{"-n", ns, "get", "pods", "-o", "json"}
	if selector != "" {
		args = append(args, "-l", selector)
	}
	var list corev1.PodList
	if err := json.Unmarshal([]byte(kubectl(t, args...)), &list); err != nil {
		t.Fatalf("pod list: %v", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

// waitRunning waits until n pods match and all are Running, and fails with
// each pod's phase, reason and events otherwise.
func waitRunning(t *testing.T, ns, selector string, n int, limit time.Duration) []corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ps := pods(t, ns, selector)
		running := 0
		for _, p := range ps {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		if running == n && len(ps) == n {
			return ps
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, p := range ps {
				fmt.Fprintf(&b, "\n  %s: %s %s", p.Name, p.Status.Phase, p.Status.Reason)
				for _, c := range p.Status.Conditions {
					if c.Status != corev1.ConditionTrue {
						fmt.Fprintf(&b, " [%s: %s]", c.Type, c.Message)
					}
				}
			}
			ev, _ := k.Output(context.Background(), "-n", ns, "get", "events", "--sort-by=.lastTimestamp")
			t.Fatalf("%d/%d pods Running in %s (%s) after %s:%s\nevents:\n%s", running, n, ns, selector, limit, b.String(), tail(ev, 30))
		}
		time.Sleep(time.Second)
	}
}

// waitGone waits until no pod matches.
func waitGone(t *testing.T, ns, selector string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for len(pods(t, ns, selector)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("pods %s in %s still there after %s", selector, ns, limit)
		}
		time.Sleep(time.Second)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// networkStatus is one entry of k8s.v1.cni.cncf.io/network-status.
type networkStatus struct {
	Name      string   `json:"name"`
	Interface string   `json:"interface"`
	IPs       []string `json:"ips"`
	Default   bool     `json:"default"`
	MAC       string   `json:"mac"`
	// InfiniBand is rdmanet's extension of an IB attachment's entry.
	InfiniBand *devinfo.InfiniBand `json:"infiniband"`
	DeviceInfo *struct {
		Type string `json:"type"`
		PCI  *struct {
			PCIAddress  string `json:"pci-address"`
			RDMADevice  string `json:"rdma-device"`
			PFPCIAdress string `json:"pf-pci-address"`
		} `json:"pci"`
	} `json:"device-info"`
}

// waitNetworkStatus waits for the pod's network-status annotation (written
// by the daemon right after ADD answers) and returns it.
func waitNetworkStatus(t *testing.T, ns, name string) []networkStatus {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		s, _ := k.Output(context.Background(), "-n", ns, "get", "pod", name, "-o", `jsonpath={.metadata.annotations.k8s\.v1\.cni\.cncf\.io/network-status}`)
		if strings.TrimSpace(s) != "" {
			var st []networkStatus
			if err := json.Unmarshal([]byte(s), &st); err != nil {
				t.Fatalf("pod %s/%s network-status %q: %v", ns, name, s, err)
			}
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s/%s has no network-status after 60s", ns, name)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func find(st []networkStatus, iface string) *networkStatus {
	for i := range st {
		if st[i].Interface == iface {
			return &st[i]
		}
	}
	return nil
}

// execIn runs a command in a pod's first container with kubectl exec. Right
// after a kubelet restart the API says Running before kubelet knows the pod
// again ("unable to upgrade connection: pod does not exist"): that is
// retried for a minute.
func execIn(t *testing.T, ns, pod string, argv ...string) (string, error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := k.Output(ctx(t, time.Minute), append([]string{"-n", ns, "exec", pod, "--"}, argv...)...)
		if err == nil || !strings.Contains(err.Error(), "unable to upgrade connection") || time.Now().After(deadline) {
			return out, err
		}
		time.Sleep(time.Second)
	}
}

// ipv4Of returns the IPv4 addresses (CIDR form) of iface inside the pod.
func ipv4Of(t *testing.T, ns, pod, iface string) []string {
	t.Helper()
	out, err := execIn(t, ns, pod, "ip", "-o", "-4", "addr", "show", "dev", iface)
	if err != nil {
		t.Fatalf("ip addr show %s in %s/%s: %v", iface, ns, pod, err)
	}
	var addrs []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "inet" {
				addrs = append(addrs, f[i+1])
			}
		}
	}
	return addrs
}

// podResources lists what the first node's real kubelet's PodResources API
// reports (DRA devices under "dra:<driver>"), per "namespace/pod" and
// resource name.
func podResources(t *testing.T) map[string]map[string][]string {
	t.Helper()
	return podResourcesAt(t, filepath.Join(layout.Dir, "node/var/lib/kubelet/pod-resources/kubelet.sock"))
}

// podResourcesOf is podResources of node n's kubelet.
func podResourcesOf(t *testing.T, n cluster.Node) map[string]map[string][]string {
	t.Helper()
	return podResourcesAt(t, layout.NodeHostPath(n, "/var/lib/kubelet/pod-resources/kubelet.sock"))
}

func podResourcesAt(t *testing.T, sock string) map[string]map[string][]string {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("PodResources %s: %v", sock, err)
	}
	defer conn.Close()
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := podresources.NewPodResourcesListerClient(conn).List(c, &podresources.ListPodResourcesRequest{})
	if err != nil {
		t.Fatalf("PodResources List: %v", err)
	}
	out := map[string]map[string][]string{}
	for _, p := range resp.PodResources {
		m := map[string][]string{}
		for _, ctr := range p.Containers {
			for _, d := range ctr.Devices {
				m[d.ResourceName] = append(m[d.ResourceName], d.DeviceIds...)
			}
			// DRA devices under "dra:<driver>", by device name
			for _, dr := range ctr.DynamicResources {
				for _, r := range dr.ClaimResources {
					m["dra:"+r.DriverName] = append(m["dra:"+r.DriverName], r.DeviceName)
				}
			}
		}
		out[p.Namespace+"/"+p.Name] = m
	}
	return out
}

// ipamBlocks reads every IPAMBlock of the kubernetes store.
func ipamBlocks(t *testing.T) []v1alpha1.IPAMBlock {
	t.Helper()
	var list v1alpha1.IPAMBlockList
	if err := json.Unmarshal([]byte(kubectl(t, "get", "ipamblocks.rdmanet.io", "-A", "-o", "json")), &list); err != nil {
		t.Fatalf("ipamblocks: %v", err)
	}
	return list.Items
}

// ipamAllocations lists every address the kubernetes store holds, as
// "ip -> namespace/pod".
func ipamAllocations(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, b := range ipamBlocks(t) {
		for ip, a := range b.Spec.Allocations {
			out[ip] = a.PodNamespace + "/" + a.PodName
		}
	}
	return out
}
