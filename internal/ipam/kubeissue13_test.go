package ipam_test

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/internal/ipam/gc"
	"github.com/rdmanet/rdmanet/internal/ipam/ipamtest"
	"github.com/rdmanet/rdmanet/test/apiserver"
)

func kubeNodesOf(n int) func(t *testing.T) []*ipam.Allocator {
	return func(t *testing.T) []*ipam.Allocator {
		return kubeNodes(t, kubeStore(t, apiserver.Shared(t).Config()), n)
	}
}

// TestKubeOverlappingNADs: issue 13, defect 6 on the real API server (three
// nodes allocating in parallel from two NADs with overlapping ranges).
func TestKubeOverlappingNADs(t *testing.T) {
	apiserver.Shared(t)
	testOverlappingNADs(t, kubeNodesOf(3), uniq("overlap"))
}

// TestKubeGatewayReserved: issue 13, defect 7 on the real API server; the
// reservation and the allocation times survive the CRD's schema (a field
// the schema lacks would be pruned silently).
func TestKubeGatewayReserved(t *testing.T) {
	srv := apiserver.Shared(t)
	network := uniq("gw")
	testGatewayReserved(t, kubeNodesOf(3), network)

	ctx := context.Background()
	// Every block of the subtest's widest range: 124 + 1 pod addresses and the gateway.
	cfg := parseNAD(t, "wider-range", `{"range":"10.72.0.0/25","network_name":"`+network+`-first"}`)
	blocks, err := kubeStore(t, srv.Config()).List(ctx, cfg.Pool(cfg.Ranges[0]), "")
	if err != nil {
		t.Fatal(err)
	}
	var total, reserved, created int
	for _, b := range blocks {
		for _, al := range b.Spec.Allocations {
			total++
			if al.Reserved == ipam.ReservedGateway {
				reserved++
			}
			if _, err := time.Parse(time.RFC3339Nano, al.Created); err == nil {
				created++
			}
		}
	}
	if total != 126 || reserved != 1 || created != total {
		t.Fatalf("the API server kept %d reservations and %d created times of %d allocations, want 1 and all", reserved, created, total)
	}
}

// TestKubeFailsClosed: issue 13, defect 4 with the node config the
// DaemonSet writes: once its kubeconfig is gone, ADD fails naming it (no
// node-local address); DEL of an attachment this node never recorded succeeds.
func TestKubeFailsClosed(t *testing.T) {
	srv := apiserver.Shared(t)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "rdmanet-ipam.kubeconfig")
	if err := srv.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	nodeConf := filepath.Join(dir, "rdmanet-ipam.conf")
	if err := os.WriteFile(nodeConf, []byte(`{"store":{"type":"kubernetes","kubeconfig":"`+kubeconfig+`","path":"`+filepath.Join(dir, "state")+`"},"node_name":"closed-node"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := ipam.NewPlugin()
	p.Getenv = func(k string) string { return map[string]string{ipam.EnvNodeConfig: nodeConf}[k] }
	p.Stdout, p.Stderr = &strings.Builder{}, &strings.Builder{}
	conf := []byte(`{"cniVersion":"1.0.0","name":"closed","ipam":{"type":"whereabouts","range":"10.75.0.0/24","network_name":"` + uniq("closed") + `"}}`)
	args := func(id string) *skel.CmdArgs { return &skel.CmdArgs{ContainerID: id, IfName: "net1", StdinData: conf} }
	if err := p.Add(args("ok")); err != nil {
		t.Fatalf("ADD with the kubeconfig in place: %v", err)
	}
	if err := os.Remove(kubeconfig); err != nil {
		t.Fatal(err)
	}
	err := p.Add(args("after"))
	if err == nil || !strings.Contains(err.Error(), kubeconfig) || !strings.Contains(err.Error(), nodeConf) {
		t.Fatalf("ADD without the kubeconfig: %v, want an error naming %s and %s", err, kubeconfig, nodeConf)
	}
	if err := p.Del(args("never-added")); err != nil {
		t.Fatalf("DEL of an unknown attachment without the kubeconfig: %v", err)
	}
	if err := p.Del(args("ok")); err == nil {
		t.Fatal("DEL of an attachment holding an address succeeded without reaching the store")
	}
}

// TestKubeGCSlowStatus: issue 13, defect 8 on the real API server: a pod's
// sandbox is replaced, the new sandbox has its address but the pod's
// network-status still shows the old one: GC keeps the new address.
func TestKubeGCSlowStatus(t *testing.T) {
	srv := apiserver.Shared(t)
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	ns := uniq("gc-slow")
	node := uniq("slow-node")
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train-0"},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, r := parseRange(t, `{"range":"10.76.0.0/24","network_name":"`+ns+`"}`)
	store := kubeStore(t, srv.Config())
	dir := t.TempDir()
	clock := time.Now().Add(-time.Hour)
	a := &ipam.Allocator{Store: store, Node: node, Lock: &ipam.FileLock{Dir: dir}, StateDir: dir, Now: func() time.Time { return clock }}
	owner := func(sandbox string) ipam.Owner {
		return ipam.Owner{ContainerID: sandbox, IfName: "net1", PodNamespace: ns, PodName: pod.Name, PodUID: string(pod.UID)}
	}
	oldAddr, err := a.Allocate(ctx, cfg.Network, r, owner("sandbox-1"))
	if err != nil {
		t.Fatal(err)
	}
	st, _ := json.Marshal([]map[string]any{{"name": ns + "/net", "interface": "net1", "ips": []string{oldAddr.String()}}})
	pod.Annotations = map[string]string{"k8s.v1.cni.cncf.io/network-status": string(st)}
	if _, err := cs.CoreV1().Pods(ns).Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The sandbox dies without a DEL; kubelet's new sandbox gets an address
	// 30 minutes later; its network-status is not written yet.
	clock = clock.Add(30 * time.Minute)
	newAddr, err := a.Allocate(ctx, cfg.Network, r, owner("sandbox-2"))
	if err != nil {
		t.Fatal(err)
	}
	run := func() map[netip.Addr]string {
		t.Helper()
		if _, err := gc.Run(ctx, gc.Options{Store: store, Cluster: kubeCluster(t, srv.Config()), Network: cfg.Network}); err != nil {
			t.Fatal(err)
		}
		out := map[netip.Addr]string{}
		for addr, al := range ipamtest.StoreAllocations(t, ctx, store, cfg.Pool(r)) {
			out[addr] = al.ContainerID
		}
		return out
	}
	if got := run(); got[newAddr] != "sandbox-2" || got[oldAddr] != "sandbox-1" {
		t.Fatalf("GC with the status still showing the old sandbox: %v, want both kept (the status still lists the old one)", got)
	}
	// The status catches up: the old sandbox's address goes.
	pod, _ = cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	st, _ = json.Marshal([]map[string]any{{"name": ns + "/net", "interface": "net1", "ips": []string{newAddr.String()}}})
	pod.Annotations["k8s.v1.cni.cncf.io/network-status"] = string(st)
	if _, err := cs.CoreV1().Pods(ns).Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := run(); len(got) != 1 || got[newAddr] != "sandbox-2" {
		t.Fatalf("GC after the status caught up: %v, want only %s of sandbox-2", got, newAddr)
	}
}
