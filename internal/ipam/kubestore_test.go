package ipam_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	current "github.com/containernetworking/cni/pkg/types/100"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	v1alpha1 "github.com/rdmanet/rdmanet/api/ipam/v1alpha1"
	"github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/internal/ipam/gc"
	"github.com/rdmanet/rdmanet/internal/ipam/ipamtest"
	"github.com/rdmanet/rdmanet/test/apiserver"
)

func TestMain(m *testing.M) {
	code := m.Run()
	apiserver.StopShared()
	os.Exit(code)
}

var uniqCounter atomic.Int64

// uniq makes API object and network names unique per run, so the shared
// server can run the tests repeatedly (-count=N).
func uniq(prefix string) string { return fmt.Sprintf("%s-%d", prefix, uniqCounter.Add(1)) }

func kubeStore(t testing.TB, cfg *rest.Config) *ipam.KubeStore {
	t.Helper()
	s, err := ipam.NewKubeStore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func kubeCluster(t testing.TB, cfg *rest.Config) *gc.KubeCluster {
	t.Helper()
	c, err := gc.NewKubeCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func kubeNodes(t testing.TB, store ipam.Store, n int) []*ipam.Allocator {
	dir := t.TempDir()
	var out []*ipam.Allocator
	for i := range n {
		name := fmt.Sprintf("node-%02d", i)
		out = append(out, &ipam.Allocator{Store: store, Node: name, Lock: &ipam.FileLock{Dir: filepath.Join(dir, name)}, StateDir: filepath.Join(dir, name)})
	}
	return out
}

// TestKubeConcurrency: 10 simulated nodes × 100 allocations in parallel on a
// real API server → 1000 distinct usable addresses; then 1000 releases → empty.
// Repeated with a range exactly as large as the demand (no failure) and one
// address smaller (exactly one "range exhausted").
func TestKubeConcurrency(t *testing.T) {
	srv := apiserver.Shared(t)
	store := kubeStore(t, srv.Config())
	tests := []struct {
		name       string
		ipam       string
		wantFailed int
	}{
		{name: "seed range", ipam: `{"range":"10.60.0.0/16","exclude":["10.60.0.0/24"],"network_name":"conc-seed"}`},
		// 10.61.0.0/22 minus network address, exclude .0.0/29 and range_end: .0.8-.3.239 = 1000 addresses.
		{name: "exact fit", ipam: `{"range":"10.61.0.0/22","exclude":["10.61.0.0/29"],"range_end":"10.61.3.239","network_name":"conc-exact"}`},
		{name: "one short", ipam: `{"range":"10.61.0.0/22","exclude":["10.61.0.0/29"],"range_end":"10.61.3.238","network_name":"conc-short"}`, wantFailed: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cfg, r := parseRange(t, tc.ipam)
			if want := int64(1000 - tc.wantFailed); tc.name != "seed range" && r.Size().Int64() != want {
				t.Fatalf("range has %s usable addresses, the test needs %d", r.Size(), want)
			}
			pool := ipam.Pool{Network: cfg.Network, Prefix: r.Prefix}
			nodes := kubeNodes(t, store, 10)
			outs := ipamtest.AllocateMany(ctx, nodes, cfg.Network, r, 100, 10)
			failed := ipamtest.CheckOutcomes(t, ctx, store, pool, r, outs)
			if len(failed) != tc.wantFailed {
				t.Fatalf("%d allocations failed, want %d; first: %v", len(failed), tc.wantFailed, firstErr(failed))
			}
			for _, f := range failed {
				if !errors.Is(f.Err, ipam.ErrExhausted) {
					t.Fatalf("failure is not range exhaustion: %v", f.Err)
				}
			}
			// Idempotency on the real store: repeating an ADD returns the same address.
			if o := outs[0]; o.Err == nil {
				again, err := nodes[0].Allocate(ctx, cfg.Network, r, o.Owner)
				if err != nil || again != o.Addr {
					t.Fatalf("repeated ADD: %s %v, want %s", again, err, o.Addr)
				}
			}
			ipamtest.ReleaseAll(t, ctx, nodes, store, pool, outs, 10)
		})
	}
}

func firstErr(o []ipamtest.Outcome) error {
	if len(o) == 0 {
		return nil
	}
	return o[0].Err
}

// crashTransport simulates the allocating process dying at its n-th API
// request: either before the request is sent, or after the server has
// applied it but before the reply is read. Either way the caller's context
// is canceled, like a killed process that never retries.
type crashTransport struct {
	next   http.RoundTripper
	n      int64
	after  bool
	count  atomic.Int64
	cancel context.CancelFunc
}

func (c *crashTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if c.count.Add(1) != c.n {
		return c.next.RoundTrip(req)
	}
	if c.after {
		resp, err := c.next.RoundTrip(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	c.cancel()
	return nil, errors.New("simulated crash")
}

// TestKubeFaults kills allocations at random request boundaries many times.
// Pods whose ADD failed are retried by "kubelet" with a new sandbox ID, half
// of all pods are then deleted, and GC must leave exactly the allocations of
// live pods.
func TestKubeFaults(t *testing.T) {
	srv := apiserver.Shared(t)
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	ns := uniq("faults")
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nodeNames := []string{uniq("fault-a"), uniq("fault-b"), uniq("fault-c")}
	for _, n := range nodeNames {
		if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cfg, r := parseRange(t, `{"range":"10.62.0.0/24","network_name":"`+ns+`","node_slice_size":"/28"}`)
	pool := ipam.Pool{Network: cfg.Network, Prefix: r.Prefix}
	good := kubeStore(t, srv.Config())
	lockDir := t.TempDir()
	rng := rand.New(rand.NewPCG(6, 6))

	type podState struct {
		pod   *corev1.Pod
		owner ipam.Owner
		addr  netip.Addr
		node  string
	}
	var pods []*podState
	crashes := 0
	for i := range 60 {
		node := nodeNames[i%len(nodeNames)]
		pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%02d", i)},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "x"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		owner := ipam.Owner{ContainerID: fmt.Sprintf("sandbox-%02d-0", i), IfName: "net1", PodNamespace: ns, PodName: pod.Name, PodUID: string(pod.UID)}
		ps := &podState{pod: pod, owner: owner, node: node}
		pods = append(pods, ps)

		// The crashing attempt.
		actx, cancel := context.WithCancel(ctx)
		rc := srv.Config()
		ct := &crashTransport{n: 1 + rng.Int64N(2), after: rng.IntN(2) == 0, cancel: cancel}
		rc.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { ct.next = rt; return ct }
		a := &ipam.Allocator{Store: kubeStore(t, rc), Node: node, Lock: &ipam.FileLock{Dir: filepath.Join(lockDir, node)}, StateDir: filepath.Join(lockDir, node)}
		addr, err := a.Allocate(actx, cfg.Network, r, owner)
		cancel()
		if err == nil {
			ps.addr = addr
			continue
		}
		crashes++
		// Kubelet retries the sandbox under a new ID; the old one may have leaked.
		ps.owner.ContainerID = fmt.Sprintf("sandbox-%02d-1", i)
		a = &ipam.Allocator{Store: good, Node: node, Lock: &ipam.FileLock{Dir: filepath.Join(lockDir, node)}, StateDir: filepath.Join(lockDir, node)}
		if ps.addr, err = a.Allocate(ctx, cfg.Network, r, ps.owner); err != nil {
			t.Fatalf("retry after crash: %v", err)
		}
	}
	if crashes < 20 {
		t.Fatalf("only %d of 60 attempts crashed; the fault injection is not exercising the allocator", crashes)
	}
	// The meta plugin records each pod's addresses in network-status.
	for _, ps := range pods {
		st, _ := json.Marshal([]map[string]any{{"name": ns + "/faults", "interface": "net1", "ips": []string{ps.addr.String()}}})
		ps.pod.Annotations = map[string]string{"k8s.v1.cni.cncf.io/network-status": string(st)}
		if _, err := cs.CoreV1().Pods(ns).Update(ctx, ps.pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Half of the pods go away without a DEL (node crash).
	want := map[netip.Addr]string{}
	for i, ps := range pods {
		if i%2 == 0 {
			if err := cs.CoreV1().Pods(ns).Delete(ctx, ps.pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want[ps.addr] = ps.owner.ContainerID
	}
	before := ipamtest.StoreAllocations(t, ctx, good, pool)
	rep, err := gc.Run(ctx, gc.Options{Store: good, Cluster: kubeCluster(t, srv.Config()), Network: cfg.Network, Grace: gc.NoGrace})
	if err != nil {
		t.Fatal(err)
	}
	after := ipamtest.StoreAllocations(t, ctx, good, pool)
	if len(after) != len(want) {
		t.Errorf("after GC the store holds %d allocations, want the %d live ones (before GC: %d, released %d)", len(after), len(want), len(before), len(rep.Released))
	}
	for addr, id := range want {
		if after[addr].ContainerID != id {
			t.Errorf("live allocation %s of %s: store has %+v", addr, id, after[addr])
		}
	}
	t.Logf("%d crashes; store before GC %d allocations, after %d; GC released %d", crashes, len(before), len(after), len(rep.Released))
}

// TestKubeGCRecreatedPodAndDeadNode: a StatefulSet-style pod recreated under
// the same name keeps its new address; a deleted node's blocks go away.
func TestKubeGCRecreatedPodAndDeadNode(t *testing.T) {
	srv := apiserver.Shared(t)
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	ns := uniq("gc-sts")
	live, dead := uniq("sts-live"), uniq("sts-dead")
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{live, dead} {
		if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cfg, r := parseRange(t, `{"range":"10.63.0.0/24","network_name":"`+ns+`"}`)
	pool := ipam.Pool{Network: cfg.Network, Prefix: r.Prefix}
	store := kubeStore(t, srv.Config())
	nodes := map[string]*ipam.Allocator{}
	for _, n := range []string{live, dead} {
		dir := filepath.Join(t.TempDir(), n)
		nodes[n] = &ipam.Allocator{Store: store, Node: n, Lock: &ipam.FileLock{Dir: dir}, StateDir: dir}
	}
	mkPod := func(name, node string) *corev1.Pod {
		p, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	alloc := func(p *corev1.Pod, sandbox string) netip.Addr {
		addr, err := nodes[p.Spec.NodeName].Allocate(ctx, cfg.Network, r, ipam.Owner{ContainerID: sandbox, IfName: "net1", PodNamespace: ns, PodName: p.Name, PodUID: string(p.UID)})
		if err != nil {
			t.Fatal(err)
		}
		return addr
	}
	old := mkPod("train-0", live)
	alloc(old, "old-sandbox")
	// The pod is deleted and recreated with the same name before GC runs;
	// its old sandbox's DEL never happened.
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "train-0", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	recreated := mkPod("train-0", live)
	newAddr := alloc(recreated, "new-sandbox")
	onDead := mkPod("train-1", dead)
	alloc(onDead, "dead-sandbox")
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "train-1", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Nodes().Delete(ctx, dead, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rep, err := gc.Run(ctx, gc.Options{Store: store, Cluster: kubeCluster(t, srv.Config()), Network: cfg.Network, Grace: gc.NoGrace})
	if err != nil {
		t.Fatal(err)
	}
	left := ipamtest.StoreAllocations(t, ctx, store, pool)
	if len(left) != 1 || left[newAddr].ContainerID != "new-sandbox" {
		t.Fatalf("after GC: %v, want only the recreated pod's %s", left, newAddr)
	}
	if len(rep.DeletedBlocks) != 1 {
		t.Fatalf("deleted blocks %v, want the dead node's block", rep.DeletedBlocks)
	}
	if bs, _ := store.List(ctx, pool, dead); len(bs) != 0 {
		t.Fatalf("dead node still owns %d blocks", len(bs))
	}
}

// TestKubeAPIServerRestart restarts kube-apiserver while 10 nodes allocate:
// every allocation completes, none is duplicated.
func TestKubeAPIServerRestart(t *testing.T) {
	srv := apiserver.StartT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rc := srv.Config()
	rc.Timeout = 10 * time.Second
	store := kubeStore(t, rc)
	cfg, r := parseRange(t, `{"range":"10.64.0.0/16","network_name":"restart"}`)
	pool := ipam.Pool{Network: cfg.Network, Prefix: r.Prefix}
	nodes := kubeNodes(t, store, 10)

	// Count completed allocations through a counting store wrapper so the
	// restart happens mid-run (progress-based, not time-based).
	counting := &countingStore{Store: store, restartAt: 150, restart: make(chan struct{})}
	for _, n := range nodes {
		n.Store = counting
	}
	var outs []ipamtest.Outcome
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		outs = ipamtest.AllocateMany(ctx, nodes, cfg.Network, r, 50, 3)
	}()
	select {
	case <-counting.restart:
	case <-ctx.Done():
		t.Fatal("allocations never reached the restart point")
	}
	if err := srv.RestartAPIServer(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	wg.Wait()
	if failed := ipamtest.CheckOutcomes(t, ctx, store, pool, r, outs); len(failed) != 0 {
		t.Fatalf("%d allocations failed across the restart; first: %v", len(failed), failed[0].Err)
	}
	if got := counting.writeErrors.Load(); got == 0 {
		t.Errorf("no write saw the server away: the restart did not hit the allocations")
	}
}

type countingStore struct {
	ipam.Store
	writes      atomic.Int64
	writeErrors atomic.Int64
	restartAt   int64
	restart     chan struct{}
}

func (c *countingStore) note(err error) {
	if errors.Is(err, ipam.ErrTransient) {
		c.writeErrors.Add(1)
	}
	if err != nil {
		return
	}
	if c.writes.Add(1) == c.restartAt {
		close(c.restart)
	}
}

func (c *countingStore) Update(ctx context.Context, b *v1alpha1.IPAMBlock) (*v1alpha1.IPAMBlock, error) {
	out, err := c.Store.Update(ctx, b)
	c.note(err)
	return out, err
}

func (c *countingStore) Create(ctx context.Context, b *v1alpha1.IPAMBlock) (*v1alpha1.IPAMBlock, error) {
	out, err := c.Store.Create(ctx, b)
	c.note(err)
	return out, err
}

// TestKubeLibcniAndGCCommand runs the plugin binary with the kubernetes
// store through libcni (the way a runtime execs it), then the gc command.
func TestKubeLibcniAndGCCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin binary")
	}
	srv := apiserver.Shared(t)
	bin := pluginBinDir(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := srv.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	// The seed config, unchanged but for the type; the node file selects the cluster store.
	nodeConf := filepath.Join(t.TempDir(), "rdmanet-ipam.conf")
	if err := os.WriteFile(nodeConf, []byte(`{"store":{"type":"kubernetes","kubeconfig":"`+kubeconfig+`","path":"`+t.TempDir()+`"},"node_name":"exec-node"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(ipam.EnvNodeConfig, nodeConf)
	conf := `{"cniVersion":"0.3.1","name":"face-training-rdma","plugins":[{"type":"rdmanet-ipam","ipam":{"type":"rdmanet-ipam","range":"10.65.0.0/16","exclude":["10.65.0.0/24"]}}]}`
	list, err := libcni.NetworkConfFromBytes([]byte(conf))
	if err != nil {
		t.Fatal(err)
	}
	cni := libcni.NewCNIConfigWithCacheDir([]string{bin}, t.TempDir(), nil)
	ctx := context.Background()
	rt := func(id string) *libcni.RuntimeConf {
		return &libcni.RuntimeConf{ContainerID: id, NetNS: "/var/run/netns/x", IfName: "net1",
			Args: [][2]string{{"K8S_POD_NAMESPACE", "exec"}, {"K8S_POD_NAME", id}, {"K8S_POD_UID", "uid-" + id}}}
	}
	r1, err := cni.AddNetworkList(ctx, list, rt("a"))
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	r2, err := cni.AddNetworkList(ctx, list, rt("b"))
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	res1, _ := current.NewResultFromResult(r1)
	res2, _ := current.NewResultFromResult(r2)
	if res1.IPs[0].Address.String() == res2.IPs[0].Address.String() {
		t.Fatalf("two pods got %s", res1.IPs[0].Address.String())
	}
	if err := cni.DelNetworkList(ctx, list, rt("a")); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	// Pod "b" does not exist in the API: gc releases its address.
	var out, errOut strings.Builder
	if code := gc.Main([]string{"-kubeconfig", kubeconfig, "-network", "default", "-grace", "0"}, &out, &errOut); code != 0 {
		t.Fatalf("gc exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "released "+res2.IPs[0].Address.IP.String()) || !strings.Contains(out.String(), "released=1 ") {
		t.Fatalf("gc output:\n%s", out.String())
	}
	blocks, err := kubeStore(t, srv.Config()).List(ctx, ipam.Pool{}, "exec-node")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		if len(b.Spec.Allocations) != 0 {
			t.Fatalf("allocations left: %v", b.Spec.Allocations)
		}
	}
}
