package burstbench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rdmanet/rdmanet/test/netnsutil"
)

// Options of a bench run.
type Options struct {
	Pods, Rails []int
	Runs        int
	// Attempts bounds the ADDs of one pod: a failed ADD is torn down (DEL)
	// and retried as a new sandbox after a pause, as kubelet does.
	Attempts int
	// AddTimeout bounds each ADD (0: none) as kubelet's
	// --runtime-request-timeout bounds RunPodSandbox: the runtime's context
	// ends and libcni kills the plugin process; the ADD has failed
	// (ReasonAddTimeout) and is retried like any other.
	AddTimeout time.Duration
	// MultusConnectionLimit is multus-daemon's connectionLimit (0: unset,
	// upstream's default: no limit).
	MultusConnectionLimit int
	// RdmanetDaemonArgs are extra flags of rdmanet-daemon (e.g. its limits
	// on calls in flight: --max-inflight-calls=32).
	RdmanetDaemonArgs []string
	// Progress gets one line per run of a row (nil: none).
	Progress func(string)
}

// Row runs one burst of pods × rails through impl and takes everything down
// again: a namespace of its own with the rails' NADs and the pods (created
// before the daemon starts, so both impls begin with the pods in their
// caches), a fresh daemon, every pod's ADD at once, the check that each
// attached pod has eth0 and net1..netM, DEL of all, the daemon stopped, the
// pods deleted. tag names the row's namespace and files (unique per run).
func Row(t testing.TB, n *Node, impl Impl, pods, rails int, tag string, o Options) Result {
	t.Helper()
	ctx := context.Background()
	nsName := "burst-" + tag
	podObjs := n.createRow(t, nsName, pods, rails)
	defer n.deleteRow(t, nsName, podObjs)
	netns := n.PodNS(pods)

	d, list := impl.Start(t, tag)
	defer d.Stop()
	cni := libcni.NewCNIConfigWithCacheDir([]string{n.BinDir}, t.TempDir(), nil)
	before, err := ReadProc(d.Pid())
	if err != nil {
		t.Fatal(err)
	}
	smp := sample(d, 50*time.Millisecond)

	res := Result{Impl: impl.Name(), Pods: pods, Rails: rails}
	var failed atomic.Int64
	var firstErr sync.Once
	var reasonMu sync.Mutex
	res.FailReasons = map[string]int{}
	attached := make([]*libcni.RuntimeConf, pods)
	attach := make([]time.Duration, pods)
	podNS := slices.Clone(netns) // the namespace of each pod's latest sandbox
	var retryNS retryNamespaces
	defer retryNS.remove()
	var wg sync.WaitGroup
	start := time.Now()
	for i := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for attempt := range o.Attempts {
				if attempt > 0 {
					time.Sleep(retryPause(attempt))
					// a new sandbox, as kubelet makes one: a late (retried)
					// DEL of the failed one must not reach into this one
					fresh, err := retryNS.add()
					if err != nil {
						failed.Add(1)
						t.Errorf("%s %s: pod %d: network namespace for a retry: %v", impl.Name(), tag, i, err)
						return
					}
					podNS[i] = fresh
				}
				rt := runtimeConf(fmt.Sprintf("%s-%d-a%d", tag, i, attempt), podObjs[i], podNS[i].Path())
				var timedOut bool
				err := n.Host.Do(func(ns.NetNS) error {
					actx, cancel := addContext(ctx, o.AddTimeout)
					defer cancel()
					_, err := cni.AddNetworkList(actx, list, rt)
					timedOut = errors.Is(actx.Err(), context.DeadlineExceeded)
					return err
				})
				if err == nil {
					attached[i], attach[i] = rt, time.Since(start)
					return
				}
				failed.Add(1)
				reason := FailReason(err)
				if timedOut {
					reason = ReasonAddTimeout
				}
				reasonMu.Lock()
				res.FailReasons[reason]++
				reasonMu.Unlock()
				firstErr.Do(func() { t.Logf("%s %s: first failed ADD (pod %d): %v", impl.Name(), tag, i, err) })
				_ = n.Host.Do(func(ns.NetNS) error { return cni.DelNetworkList(ctx, list, rt) }) // the runtime tears the sandbox down
			}
		}()
	}
	wg.Wait()
	res.Wall = time.Since(start)
	res.Goroutines, _ = smp.Stop()
	after, err := ReadProc(d.Pid())
	if err != nil {
		t.Fatalf("%s: read /proc after the burst (did it exit? %v): %v; log:\n%s", d.Name, d.Exited(), err, d.LogTail(3000))
	}
	res.PeakRSS, res.CPU, res.ChildCPU = after.HWM, after.CPU-before.CPU, after.ChildCPU-before.ChildCPU
	res.Failed = int(failed.Load())
	for i, rt := range attached {
		if rt == nil {
			res.Unattached++
			continue
		}
		res.Attach = append(res.Attach, attach[i])
		links := netnsutil.Links(t, podNS[i])
		for _, want := range ifNames(rails) {
			if !contains(links, want) {
				t.Errorf("%s %s: pod %d attached but has %v, want %s", impl.Name(), tag, i, links, strings.Join(ifNames(rails), ", "))
				break
			}
		}
	}
	// DEL of every attached pod, 16 at a time (not measured)
	sem := make(chan struct{}, 16)
	var delErrs atomic.Int64
	for _, rt := range attached {
		if rt == nil {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := n.Host.Do(func(ns.NetNS) error { return cni.DelNetworkList(ctx, list, rt) }); err != nil {
				if delErrs.Add(1) == 1 {
					t.Errorf("%s %s: DEL %s: %v", impl.Name(), tag, rt.ContainerID, err)
				}
			}
		}()
	}
	wg.Wait()
	if d.Exited() {
		t.Errorf("%s exited during the row; log:\n%s", d.Name, d.LogTail(3000))
	}
	d.Stop()
	if missing := n.VFsHome(); len(missing) > 0 {
		t.Fatalf("%s %s: after DEL of every pod, VFs not back in the host namespace: %v", impl.Name(), tag, missing)
	}
	return res
}

// DefaultAddTimeout is kubelet's default --runtime-request-timeout, the
// bound of a sandbox's creation and so of its CNI ADD.
const DefaultAddTimeout = 2 * time.Minute

// addContext bounds one ADD by timeout (0: ctx itself).
func addContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, timeout)
}

// retryNamespaces are the network namespaces of retried sandboxes, removed
// at the end of the row.
type retryNamespaces struct {
	mu  sync.Mutex
	nss []ns.NetNS
}

func (r *retryNamespaces) add() (ns.NetNS, error) {
	n, err := testutils.NewNS()
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.nss = append(r.nss, n)
	r.mu.Unlock()
	return n, nil
}

func (r *retryNamespaces) remove() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.nss {
		n.Close()
		_ = testutils.UnmountNS(n)
	}
	r.nss = nil
}

// ifNames are the interfaces an attached pod has: eth0, net1..netM.
func ifNames(rails int) []string {
	out := []string{"eth0"}
	for r := range rails {
		out = append(out, fmt.Sprintf("net%d", r+1))
	}
	return out
}

func runtimeConf(container string, pod *corev1.Pod, netns string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: container, NetNS: netns, IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", pod.Namespace}, {"K8S_POD_NAME", pod.Name},
			{"K8S_POD_INFRA_CONTAINER_ID", container}, {"K8S_POD_UID", string(pod.UID)}}}
}

// retryPause is the pause before the attempt'th ADD of a pod whose ADD
// failed: 0.5 s doubling up to 8 s, ±50% jitter (kubelet retries a failed
// sandbox after about 10 s); the same as bench-meta's parallel benchmark.
func retryPause(attempt int) time.Duration {
	d := 500 * time.Millisecond << min(attempt-1, 4)
	return d/2 + time.Duration(rand.Int64N(int64(d)))
}

// RailNAD names rail r's NAD: the exclusive VF chain or the shared macvlan.
func RailNAD(r int, vf bool) string {
	if vf {
		return fmt.Sprintf("rail%d-vf", r)
	}
	return fmt.Sprintf("rail%d", r)
}

// Plan says which rails of which pod get a VF: VFs go pod by pod, rail by
// rail, while the node has them (rail r of pod p is VF number p*rails+r).
func Plan(pods, rails, vfs int) [][]int {
	plan := make([][]int, pods)
	for p := range pods {
		plan[p] = make([]int, rails)
		for r := range rails {
			if i := p*rails + r; i < vfs {
				plan[p][r] = i
			} else {
				plan[p][r] = -1
			}
		}
	}
	return plan
}

// railVFNAD is the seed's exclusive chain (examples/seeds/exclusive) on
// rail r: sriov (VLAN 200) → rdma, rdmanet-ipam under the Whereabouts name
// with the node-local store, one /16 per rail.
func railVFNAD(r int) string {
	return fmt.Sprintf(`{"cniVersion":"0.3.1","name":%q,"plugins":[{"type":"sriov","vlan":200,"spoofchk":"on","trust":"off",
		"ipam":{"type":"whereabouts","range":"10.%d.0.0/16","exclude":["10.%d.0.0/24"]}},{"type":"rdma"}]}`, RailNAD(r, true), 60+r, 60+r)
}

// railMacvlanNAD is the shared rail r: macvlan (bridge mode) over the
// rail's port, host-local IPAM, one /16 per rail.
func railMacvlanNAD(r int, dataDir string) string {
	return fmt.Sprintf(`{"cniVersion":"0.3.1","name":%q,"type":"macvlan","master":%q,"mode":"bridge",
		"ipam":{"type":"host-local","ranges":[[{"subnet":"10.%d.0.0/16"}]],"dataDir":%q}}`, RailNAD(r, false), railMaster(r), 100+r, dataDir)
}

// createRow creates the row's namespace, its 2×rails NADs and its pods
// (networks annotation by the Plan, the VFs in the pod's resources and in
// the PodResources answer).
func (n *Node) createRow(t testing.TB, nsName string, pods, rails int) []*corev1.Pod {
	t.Helper()
	ctx := context.Background()
	if _, err := n.Core.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for r := range rails {
		for _, nad := range []*nadv1.NetworkAttachmentDefinition{
			{ObjectMeta: metav1.ObjectMeta{Name: RailNAD(r, true), Namespace: nsName, Annotations: map[string]string{"k8s.v1.cni.cncf.io/resourceName": ResourceName}},
				Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: railVFNAD(r)}},
			{ObjectMeta: metav1.ObjectMeta{Name: RailNAD(r, false), Namespace: nsName},
				Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: railMacvlanNAD(r, n.Dir+"/hostlocal")}},
		} {
			if _, err := n.NADs.K8sCniCncfIoV1().NetworkAttachmentDefinitions(nsName).Create(ctx, nad, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	plan := Plan(pods, rails, n.VFs)
	out := make([]*corev1.Pod, pods)
	errs := make([]error, pods)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for p := range pods {
		var nets []string
		var vfs []string
		for r, vf := range plan[p] {
			nets = append(nets, fmt.Sprintf("%s@net%d", RailNAD(r, vf >= 0), r+1))
			if vf >= 0 {
				vfs = append(vfs, VF(vf))
			}
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("trainer-%d", p), Namespace: nsName,
			Annotations: map[string]string{"k8s.v1.cni.cncf.io/networks": strings.Join(nets, ",")}},
			Spec: corev1.PodSpec{NodeName: NodeName, Containers: []corev1.Container{{Name: "trainer", Image: "trainer:1"}}}}
		if len(vfs) > 0 {
			q := *resource.NewQuantity(int64(len(vfs)), resource.DecimalSI)
			pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{ResourceName: q}, Limits: corev1.ResourceList{ResourceName: q}}
		}
		n.PR.Set(nsName+"/"+pod.Name, vfs)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[p], errs[p] = n.Core.CoreV1().Pods(nsName).Create(ctx, pod, metav1.CreateOptions{})
		}()
	}
	wg.Wait()
	for p, err := range errs {
		if err != nil {
			t.Fatalf("create pod %d of %s: %v", p, nsName, err)
		}
	}
	return out
}

// deleteRow deletes the row's pods (no kubelet: at once) and forgets their
// VFs. The namespace stays (no namespace controller runs); it is empty.
func (n *Node) deleteRow(t testing.TB, nsName string, pods []*corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		n.PR.Set(nsName+"/"+p.Name, nil)
	}
	if err := n.Core.CoreV1().Pods(nsName).DeleteCollection(context.Background(), metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{}); err != nil {
		t.Errorf("delete the pods of %s: %v", nsName, err)
	}
}

// unixTransport is an HTTP transport dialing the unix socket path.
func unixTransport(path string) *http.Transport {
	return &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}
}
