// Package nodeidentity proves rdmanet's node restriction on a real
// kube-apiserver (test/apiserver): the node identity's RBAC
// (deploy/rbac-*.yaml, deploy/dra/rbac-dra.yaml) and the
// ValidatingAdmissionPolicies of deploy/policy/node-restriction.yaml, as
// installed, with tokens bound to the rdmanet-node pods of two nodes as the
// DaemonSet's projected volume gets them (TokenRequest bound to the pod: the
// API server adds the user extra authentication.kubernetes.io/node-name).
// TestNodeRestriction is the table identity × verb × object with the
// expected answer; rdmanet's own code paths (IPAM allocator with borrowing,
// SetNetworkStatus, SetClaimNetworks, the agent's node annotation) run as
// the node and pass. TestHostToken: the host-side kubeconfig across a
// token rotation, and failing closed once the token has expired.
package nodeidentity_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8stypes "k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/rdmanet/rdmanet/api/ipam/v1alpha1"
	"github.com/rdmanet/rdmanet/internal/agent"
	"github.com/rdmanet/rdmanet/internal/cni/meta"
	"github.com/rdmanet/rdmanet/internal/cni/meta/kube"
	"github.com/rdmanet/rdmanet/internal/devinfo"
	"github.com/rdmanet/rdmanet/internal/install"
	"github.com/rdmanet/rdmanet/internal/inventory"
	"github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/internal/nodetoken"
	"github.com/rdmanet/rdmanet/test/apiserver"
)

func TestMain(m *testing.M) {
	code := m.Run()
	apiserver.StopShared()
	os.Exit(code)
}

const (
	systemNS = "rdmanet-system"
	nodeSA   = "rdmanet-daemon"
	nodeA    = "gpu-node-a"
	nodeB    = "gpu-node-b"
	driver   = "rdma.rdmanet.io"
)

// installed are the files of deploy/ this test installs: the node
// identity's RBAC and the policies.
var installed = []string{
	"deploy/namespace.yaml", "deploy/rbac-daemon.yaml", "deploy/rbac-agent.yaml", "deploy/rbac-ipam.yaml",
	"deploy/dra/rbac-dra.yaml", "deploy/policy/node-restriction.yaml",
}

// applyFiles server-side applies every object of the repository files.
func applyFiles(t testing.TB, cfg *rest.Config, files ...string) {
	t.Helper()
	root, err := apiserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			var u unstructured.Unstructured
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			gvk := u.GroupVersionKind()
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				t.Fatalf("%s: %s: %v", f, gvk, err)
			}
			var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
			if u.GetNamespace() != "" {
				ri = dyn.Resource(m.Resource).Namespace(u.GetNamespace())
			}
			data, _ := json.Marshal(u.Object)
			if _, err := ri.Patch(context.Background(), u.GetName(), k8stypes.ApplyPatchType, data,
				metav1.PatchOptions{FieldManager: "nodeidentity-test", Force: ptr.To(true), FieldValidation: "Strict"}); err != nil {
				t.Fatalf("apply %s %s/%s: %v", f, gvk.Kind, u.GetName(), err)
			}
		}
	}
}

// identity is one credential of the node identity.
type identity struct {
	name  string
	token string
	cfg   *rest.Config
	cs    kubernetes.Interface
}

func newIdentity(t testing.TB, api *apiserver.Server, name, token string) *identity {
	t.Helper()
	admin := api.Config()
	cfg := &rest.Config{Host: admin.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAFile: admin.CAFile}, QPS: -1, Burst: -1}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &identity{name: name, token: token, cfg: cfg, cs: cs}
}

// mint returns a token of the node ServiceAccount bound to pod (the
// DaemonSet's projected token), or bound to nothing when pod is "".
func mint(t testing.TB, admin kubernetes.Interface, pod *corev1.Pod) string {
	t.Helper()
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if pod != nil {
		req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	tr, err := admin.CoreV1().ServiceAccounts(systemNS).CreateToken(context.Background(), nodeSA, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", systemNS, nodeSA, err)
	}
	return tr.Status.Token
}

// world is the cluster the table runs against.
type world struct {
	api                *apiserver.Server
	admin              kubernetes.Interface
	ns                 string
	nodePodA, nodePodB *corev1.Pod // the rdmanet-node pods
	a, b, unbound      *identity
	podA, podB         *corev1.Pod // workload pods
	claimA, claimB     *resourcev1.ResourceClaim
}

var (
	sharedMu    sync.Mutex
	sharedWorld *world
)

// setup builds the world once per test binary (on the shared API server).
func setup(t *testing.T) *world {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if sharedWorld == nil {
		sharedWorld = build(t)
	}
	return sharedWorld
}

func build(t *testing.T) *world {
	t.Helper()
	api := apiserver.Shared(t)
	ctx := context.Background()
	admin, err := kubernetes.NewForConfig(api.Config())
	if err != nil {
		t.Fatal(err)
	}
	applyFiles(t, api.Config(), installed...)
	w := &world{api: api, admin: admin, ns: "work"}
	for _, n := range []string{nodeA, nodeB} {
		if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"kubernetes.io/hostname": n}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mkPod := func(ns, name, node, sa string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: sa, Containers: []corev1.Container{{Name: "c", Image: "rdmanet/rdmanet"}}}}
		p, err := admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	w.nodePodA, w.nodePodB = mkPod(systemNS, "rdmanet-node-a", nodeA, nodeSA), mkPod(systemNS, "rdmanet-node-b", nodeB, nodeSA)
	w.podA, w.podB = mkPod(w.ns, "train-a", nodeA, ""), mkPod(w.ns, "train-b", nodeB, "")
	w.a = newIdentity(t, api, nodeA, mint(t, admin, w.nodePodA))
	w.b = newIdentity(t, api, nodeB, mint(t, admin, w.nodePodB))
	w.unbound = newIdentity(t, api, "unbound", mint(t, admin, nil))
	w.claimA, w.claimB = w.allocateClaim(t, "claim-a", nodeA, w.podA), w.allocateClaim(t, "claim-b", nodeB, w.podB)
	// The bound tokens carry their node, as the policies read it.
	for _, id := range []*identity{w.a, w.b} {
		r, err := id.cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Status.UserInfo.Extra["authentication.kubernetes.io/node-name"]; len(got) != 1 || got[0] != id.name {
			t.Fatalf("token of %s: user %s extra %v, want node-name [%s]", id.name, r.Status.UserInfo.Username, r.Status.UserInfo.Extra, id.name)
		}
	}
	w.waitForPolicies(t)
	return w
}

// waitForPolicies waits until the API server enforces every policy: each
// one refuses a dry-run request of node A (dry-run passes admission and
// persists nothing). Policies load asynchronously after they are created.
func (w *world) waitForPolicies(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	dry := metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}
	probes := map[string]func() error{
		"rdmanet-node-pods": func() error {
			_, err := w.a.cs.CoreV1().Pods(w.ns).Patch(ctx, w.podB.Name, k8stypes.MergePatchType, []byte(`{"metadata":{"annotations":{"k8s.v1.cni.cncf.io/network-status":"[]"}}}`),
				metav1.PatchOptions{DryRun: dry.DryRun}, "status")
			return err
		},
		"rdmanet-node-nodes": func() error {
			_, err := w.a.cs.CoreV1().Nodes().Patch(ctx, nodeB, k8stypes.MergePatchType, []byte(`{"metadata":{"annotations":{"rdmanet.io/x":"y"}}}`), metav1.PatchOptions{DryRun: dry.DryRun})
			return err
		},
		"rdmanet-node-resourceslices": func() error {
			_, err := w.a.cs.ResourceV1().ResourceSlices().Create(ctx, slice("probe", nodeB, driver), metav1.CreateOptions{DryRun: dry.DryRun})
			return err
		},
		"rdmanet-node-ipamblocks": func() error {
			return createBlock(ctx, w.a, block("probe", nodeB, "10.250.0.0/29"), dry.DryRun)
		},
		"rdmanet-node-events": func() error {
			_, err := w.a.cs.CoreV1().Events(w.ns).Create(ctx, event("probe", w.podA, nodeB), metav1.CreateOptions{DryRun: dry.DryRun})
			return err
		},
		"rdmanet-node-resourceclaims": func() error {
			_, err := w.a.cs.ResourceV1().ResourceClaims(w.ns).Patch(ctx, w.claimB.Name, k8stypes.MergePatchType,
				[]byte(`{"metadata":{"annotations":{"probe":"x"}}}`), metav1.PatchOptions{DryRun: dry.DryRun}, "status")
			return err
		},
	}
	for name, probe := range probes {
		deadline := time.Now().Add(60 * time.Second)
		for {
			err := probe()
			if apierrors.IsForbidden(err) && strings.Contains(err.Error(), name) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("policy %s not enforced after 60 s: the probe got %v", name, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func slice(name, node, drv string) *resourcev1.ResourceSlice {
	return &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceSliceSpec{Driver: drv, NodeName: ptr.To(node),
			Pool:    resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1},
			Devices: []resourcev1.Device{{Name: "vf-0"}}}}
}

func event(name string, pod *corev1.Pod, host string) *corev1.Event {
	return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: pod.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, APIVersion: "v1"},
		Reason:         kube.EventReasonAttachFailed, Message: "test", Type: corev1.EventTypeWarning,
		Source: corev1.EventSource{Component: kube.EventComponent, Host: host}, Count: 1,
		FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now()}
}

func claim(name string) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
			{Name: "nic", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "sriov-rdma"}}}}}}
}

// allocateClaim creates claim name allocated on node (device vf-0 of the
// node's pool of rdmanet's driver), reserved for pod, as the scheduler would.
func (w *world) allocateClaim(t *testing.T, name, node string, pod *corev1.Pod) *resourcev1.ResourceClaim {
	t.Helper()
	ctx := context.Background()
	c, err := w.admin.ResourceV1().ResourceClaims(w.ns).Create(ctx, claim(name), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Status.Allocation = &resourcev1.AllocationResult{
		Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
			{Request: "nic", Driver: driver, Pool: node, Device: "vf-0"}}},
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}},
	}
	c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}}
	if c, err = w.admin.ResourceV1().ResourceClaims(w.ns).UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return c
}

func block(name, node, cidr string) *v1alpha1.IPAMBlock {
	b := &v1alpha1.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.LabelNode: node}},
		Spec: v1alpha1.IPAMBlockSpec{Network: "probe", Range: cidr, CIDR: cidr, Node: node}}
	b.APIVersion, b.Kind = v1alpha1.SchemeGroupVersion.String(), v1alpha1.IPAMBlockKind
	return b
}

func blockClient(t testing.TB, cfg *rest.Config) dynamic.NamespaceableResourceInterface {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dyn.Resource(v1alpha1.SchemeGroupVersion.WithResource(v1alpha1.IPAMBlockResource))
}

func toUnstructured(obj any) *unstructured.Unstructured {
	b, _ := json.Marshal(obj)
	u := &unstructured.Unstructured{}
	_ = json.Unmarshal(b, &u.Object)
	return u
}

func createBlock(ctx context.Context, id *identity, b *v1alpha1.IPAMBlock, dryRun []string) error {
	dyn, err := dynamic.NewForConfig(id.cfg)
	if err != nil {
		return err
	}
	_, err = dyn.Resource(v1alpha1.SchemeGroupVersion.WithResource(v1alpha1.IPAMBlockResource)).Create(ctx, toUnstructured(b), metav1.CreateOptions{DryRun: dryRun})
	return err
}

// updateBlock reads block name (as admin: the current version), changes it
// with mutate, and writes it back as id.
func (w *world) updateBlock(ctx context.Context, t *testing.T, id *identity, name string, mutate func(b *v1alpha1.IPAMBlock)) error {
	store, err := ipam.NewKubeStore(w.api.Config())
	if err != nil {
		t.Fatal(err)
	}
	b, err := store.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	mutate(b)
	mine, err := ipam.NewKubeStore(id.cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = mine.Update(ctx, b)
	return err
}

// answer is what the API server says to one request.
type answer struct {
	code int    // 0: allowed; else the HTTP status
	rule string // a substring of the refusal: the policy rule, or the RBAC/authorization reason
}

func (a answer) String() string {
	if a.code == 0 {
		return "allowed"
	}
	return fmt.Sprintf("%d %s", a.code, a.rule)
}

func allowed() answer                { return answer{} }
func refused(rule string) answer     { return answer{code: 403, rule: rule} }
func invalid(reason string) answer   { return answer{code: 422, rule: reason} }
func rbacRefused(verb string) answer { return answer{code: 403, rule: "cannot " + verb} }

func statusOf(err error) (int, string) {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return int(st.Status().Code), st.Status().Message
	}
	return -1, err.Error()
}

type row struct {
	who    *identity
	verb   string
	object string
	want   answer
	call   func(ctx context.Context, id *identity) error
}

// TestNodeRestriction: the identity × verb × object table on the real API
// server with deploy/'s RBAC and policies.
func TestNodeRestriction(t *testing.T) {
	w := setup(t)
	ctx := context.Background()

	// IPAM: node B claims the only block of a small range (every block then
	// claimed), node A claims a block of another range; then A borrows from
	// B's block — all through rdmanet's allocator with the node's identity.
	allocator := func(id *identity) *ipam.Allocator {
		store, err := ipam.NewKubeStore(id.cfg)
		if err != nil {
			t.Fatal(err)
		}
		return &ipam.Allocator{Store: store, Node: id.name, Lock: &ipam.FileLock{Dir: t.TempDir()}, StateDir: t.TempDir()}
	}
	parse := func(rng, network string) *ipam.Range {
		c, err := ipam.Parse([]byte(`{"cniVersion":"1.0.0","name":"t","ipam":{"range":"`+rng+`","network_name":"`+network+`"}}`), ipam.Env{})
		if err != nil {
			t.Fatal(err)
		}
		return c.Ranges[0]
	}
	small, wide := parse("10.99.0.0/29", "nid-small"), parse("10.98.0.0/24", "nid-wide")
	allocA, allocB := allocator(w.a), allocator(w.b)
	ownerB := ipam.Owner{ContainerID: "cb", IfName: "net1", PodNamespace: w.ns, PodName: w.podB.Name, PodUID: string(w.podB.UID)}
	ownerA := ipam.Owner{ContainerID: "ca", IfName: "net1", PodNamespace: w.ns, PodName: w.podA.Name, PodUID: string(w.podA.UID)}
	if _, err := allocB.Allocate(ctx, "nid-small", small, ownerB); err != nil {
		t.Fatalf("node B claims the small range's block: %v", err)
	}
	// A range whose gateway lies in node B's block (B's config has none).
	gwPlain, gwWith := func() *ipam.Range {
		c, err := ipam.Parse([]byte(`{"cniVersion":"1.0.0","name":"t","ipam":{"range":"10.94.0.0/28","exclude":["10.94.0.1/32"],"network_name":"nid-gw"}}`), ipam.Env{})
		if err != nil {
			t.Fatal(err)
		}
		return c.Ranges[0]
	}(), func() *ipam.Range {
		c, err := ipam.Parse([]byte(`{"cniVersion":"1.0.0","name":"t","ipam":{"range":"10.94.0.0/28","gateway":"10.94.0.1","network_name":"nid-gw"}}`), ipam.Env{})
		if err != nil {
			t.Fatal(err)
		}
		return c.Ranges[0]
	}()
	if _, err := allocB.Allocate(ctx, "nid-gw", gwPlain, ipam.Owner{ContainerID: "cb-gw", IfName: "net1"}); err != nil {
		t.Fatalf("node B claims the gateway's block: %v", err)
	}
	adminStore, err := ipam.NewKubeStore(w.api.Config())
	if err != nil {
		t.Fatal(err)
	}
	smallPool := ipam.Pool{Network: "nid-small", Prefix: small.Prefix}
	blocksB, err := adminStore.List(ctx, smallPool, nodeB)
	if err != nil || len(blocksB) != 1 {
		t.Fatalf("node B's blocks: %v %v", blocksB, err)
	}
	blockB := blocksB[0].Name
	addrB := func() string {
		for k, al := range mustGetBlock(t, adminStore, blockB).Spec.Allocations {
			if al.ContainerID == "cb" {
				return k
			}
		}
		t.Fatal("node B's allocation is gone")
		return ""
	}()
	var borrowed netip.Addr

	// ResourceSlice of node B, published by B; claims allocated on A and B.
	if _, err := w.b.cs.ResourceV1().ResourceSlices().Create(ctx, slice("slice-b", nodeB, driver), metav1.CreateOptions{}); err != nil {
		t.Fatalf("node B publishes its slice: %v", err)
	}
	claimA, claimB := w.claimA, w.claimB
	claimNet := func(c *resourcev1.ResourceClaim, node string) []meta.ClaimNetwork {
		return []meta.ClaimNetwork{{ClaimDevice: meta.ClaimDevice{Namespace: c.Namespace, Claim: c.Name, Driver: driver, Pool: node, Device: "vf-0"},
			Pod: c.Namespace + "/" + c.Status.ReservedFor[0].Name, Interface: "net1", IPs: []string{"10.60.1.5/24"}, MAC: "02:00:00:00:00:01"}}
	}
	source := func(id *identity) *kube.KubeSource {
		nads, err := nadClient(id.cfg)
		if err != nil {
			t.Fatal(err)
		}
		return &kube.KubeSource{Core: id.cs, NADs: nads}
	}
	status := devinfo.Statuses([]nadv1.NetworkStatus{{Name: w.ns + "/face-training-rdma", Interface: "net1", IPs: []string{"10.60.1.5"}}})
	statusPatch := func(ns, pod, patch string) func(context.Context, *identity) error {
		return func(ctx context.Context, id *identity) error {
			_, err := id.cs.CoreV1().Pods(ns).Patch(ctx, pod, k8stypes.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
			return err
		}
	}
	nodePatch := func(node, patch string) func(context.Context, *identity) error {
		return func(ctx context.Context, id *identity) error {
			_, err := id.cs.CoreV1().Nodes().Patch(ctx, node, k8stypes.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "rdmanet-agent"})
			return err
		}
	}
	claimStatusPatch := func(c *resourcev1.ResourceClaim, patch string) func(context.Context, *identity) error {
		return func(ctx context.Context, id *identity) error {
			_, err := id.cs.ResourceV1().ResourceClaims(c.Namespace).Patch(ctx, c.Name, k8stypes.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
			return err
		}
	}

	rows := []row{
		// pods
		{w.a, "patch pods/status network-status (SetNetworkStatus)", "pod on own node", allowed(), func(ctx context.Context, id *identity) error {
			return source(id).SetNetworkStatus(ctx, w.ns, w.podA.Name, w.podA.UID, status)
		}},
		{w.a, "patch pods/status network-status (SetNetworkStatus)", "pod on node B", refused("rdmanet-node/pod-on-own-node"), func(ctx context.Context, id *identity) error {
			return source(id).SetNetworkStatus(ctx, w.ns, w.podB.Name, w.podB.UID, status)
		}},
		{w.b, "patch pods/status network-status (SetNetworkStatus)", "pod on own node", allowed(), func(ctx context.Context, id *identity) error {
			return source(id).SetNetworkStatus(ctx, w.ns, w.podB.Name, w.podB.UID, status)
		}},
		{w.a, "patch pods/status: a label", "pod on own node", refused("rdmanet-node/pod-network-status-only"),
			statusPatch(w.ns, w.podA.Name, `{"metadata":{"labels":{"stolen":"yes"}}}`)},
		{w.a, "patch pods/status: status.podIPs", "pod on own node", refused("rdmanet-node/pod-network-status-only"),
			statusPatch(w.ns, w.podA.Name, `{"status":{"podIP":"10.0.0.9","podIPs":[{"ip":"10.0.0.9"}]}}`)},
		{w.a, "patch pods (spec)", "pod on own node", rbacRefused("patch resource \"pods\""),
			func(ctx context.Context, id *identity) error {
				_, err := id.cs.CoreV1().Pods(w.ns).Patch(ctx, w.podA.Name, k8stypes.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
				return err
			}},
		{w.unbound, "patch pods/status network-status", "pod on node A", refused("rdmanet-node/bound-token"), func(ctx context.Context, id *identity) error {
			return source(id).SetNetworkStatus(ctx, w.ns, w.podA.Name, w.podA.UID, status)
		}},
		// events
		{w.a, "create event (source.host = own node)", "event on own pod", allowed(), func(ctx context.Context, id *identity) error {
			_, err := id.cs.CoreV1().Events(w.ns).Create(ctx, event("ev-a", w.podA, nodeA), metav1.CreateOptions{})
			return err
		}},
		{w.a, "create event (source.host = node B)", "event on node B's pod", refused("rdmanet-node/event-from-own-node"), func(ctx context.Context, id *identity) error {
			_, err := id.cs.CoreV1().Events(w.ns).Create(ctx, event("ev-b", w.podB, nodeB), metav1.CreateOptions{})
			return err
		}},
		// IPAM blocks
		{w.a, "create ipamblock (Allocate: claim a block)", "own block", allowed(), func(ctx context.Context, id *identity) error {
			_, err := allocA.Allocate(ctx, "nid-wide", wide, ownerA)
			return err
		}},
		{w.a, "update ipamblock (Allocate: borrow a free address)", "node B's block", allowed(), func(ctx context.Context, id *identity) error {
			a, err := allocA.Allocate(ctx, "nid-small", small, ipam.Owner{ContainerID: "ca2", IfName: "net1", PodNamespace: w.ns, PodName: w.podA.Name})
			borrowed = a
			return err
		}},
		{w.a, "update ipamblock (Release: a borrowed address)", "node B's block", allowed(), func(ctx context.Context, id *identity) error {
			if !borrowed.IsValid() {
				return errors.New("nothing was borrowed")
			}
			return allocA.Release(ctx, smallPool, ipam.Owner{ContainerID: "ca2", IfName: "net1"})
		}},
		{w.a, "update ipamblock (Allocate: reserve the gateway, then borrow)", "node B's block holding the gateway", allowed(), func(ctx context.Context, id *identity) error {
			if _, err := allocA.Allocate(ctx, "nid-gw", gwWith, ipam.Owner{ContainerID: "ca-gw", IfName: "net1"}); err != nil {
				return err
			}
			bs, err := adminStore.List(ctx, ipam.Pool{Network: "nid-gw", Prefix: gwWith.Prefix}, nodeB)
			if err != nil || len(bs) != 1 || bs[0].Spec.Allocations["10.94.0.1"].Reserved != ipam.ReservedGateway {
				return fmt.Errorf("gateway not reserved in node B's block: %+v %v", bs, err)
			}
			return nil
		}},
		{w.a, "update ipamblock: reserve a free address (not as the gateway)", "node B's block", refused("rdmanet-node/block-own-allocations"), func(ctx context.Context, id *identity) error {
			return w.updateBlock(ctx, t, id, blockB, func(b *v1alpha1.IPAMBlock) {
				b.Spec.Allocations[freeAddr(t, b)] = v1alpha1.Allocation{Reserved: "held-by-attacker"}
			})
		}},
		{w.a, "create ipamblock with spec.node = node B", "node B's block", refused("rdmanet-node/block-claim-own"), func(ctx context.Context, id *identity) error {
			return createBlock(ctx, id, block("stolen-block", nodeB, "10.97.0.0/29"), nil)
		}},
		{w.a, "update ipamblock: release node B's pod's address", "node B's block", refused("rdmanet-node/block-own-allocations"), func(ctx context.Context, id *identity) error {
			return w.updateBlock(ctx, t, id, blockB, func(b *v1alpha1.IPAMBlock) { delete(b.Spec.Allocations, addrB) })
		}},
		{w.a, "update ipamblock: take over node B's pod's address", "node B's block", refused("rdmanet-node/block-own-allocations"), func(ctx context.Context, id *identity) error {
			return w.updateBlock(ctx, t, id, blockB, func(b *v1alpha1.IPAMBlock) {
				al := b.Spec.Allocations[addrB]
				al.Node, al.ContainerID, al.PodName = nodeA, "attacker", "attacker"
				b.Spec.Allocations[addrB] = al
			})
		}},
		{w.a, "update ipamblock: add an allocation as node B's", "node B's block", refused("rdmanet-node/block-own-allocations"), func(ctx context.Context, id *identity) error {
			return w.updateBlock(ctx, t, id, blockB, func(b *v1alpha1.IPAMBlock) {
				b.Spec.Allocations[freeAddr(t, b)] = v1alpha1.Allocation{ContainerID: "x", IfName: "net1"}
			})
		}},
		{w.a, "update ipamblock: spec.node := node A", "node B's block", refused("rdmanet-node/block-identity-fixed"), func(ctx context.Context, id *identity) error {
			return w.updateBlock(ctx, t, id, blockB, func(b *v1alpha1.IPAMBlock) { b.Spec.Node = nodeA })
		}},
		{w.a, "delete ipamblock", "node B's block", rbacRefused("delete resource \"ipamblocks\""), func(ctx context.Context, id *identity) error {
			return blockClient(t, id.cfg).Delete(ctx, blockB, metav1.DeleteOptions{})
		}},
		{w.unbound, "create ipamblock with spec.node = node A", "node A's block", refused("rdmanet-node/bound-token"), func(ctx context.Context, id *identity) error {
			return createBlock(ctx, id, block("unbound-block", nodeA, "10.96.0.0/29"), nil)
		}},
		// ResourceSlices
		{w.a, "create resourceslice (spec.nodeName = own node)", "own slice", allowed(), func(ctx context.Context, id *identity) error {
			_, err := id.cs.ResourceV1().ResourceSlices().Create(ctx, slice("slice-a", nodeA, driver), metav1.CreateOptions{})
			return err
		}},
		{w.a, "update resourceslice", "own slice", allowed(), func(ctx context.Context, id *identity) error {
			s, err := id.cs.ResourceV1().ResourceSlices().Get(ctx, "slice-a", metav1.GetOptions{})
			if err != nil {
				return err
			}
			s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: "vf-1"})
			_, err = id.cs.ResourceV1().ResourceSlices().Update(ctx, s, metav1.UpdateOptions{})
			return err
		}},
		{w.a, "create resourceslice (spec.nodeName = node B)", "node B's slice", refused("rdmanet-node/slice-own-node"), func(ctx context.Context, id *identity) error {
			_, err := id.cs.ResourceV1().ResourceSlices().Create(ctx, slice("fake-b", nodeB, driver), metav1.CreateOptions{})
			return err
		}},
		{w.a, "create resourceslice of another driver", "own node", refused("rdmanet-node/slice-own-node"), func(ctx context.Context, id *identity) error {
			_, err := id.cs.ResourceV1().ResourceSlices().Create(ctx, slice("gpu-a", nodeA, "gpu.example.com"), metav1.CreateOptions{})
			return err
		}},
		{w.a, "update resourceslice", "node B's slice", refused("rdmanet-node/slice-own-node"), func(ctx context.Context, id *identity) error {
			s, err := id.cs.ResourceV1().ResourceSlices().Get(ctx, "slice-b", metav1.GetOptions{})
			if err != nil {
				return err
			}
			s.Spec.Devices = nil
			_, err = id.cs.ResourceV1().ResourceSlices().Update(ctx, s, metav1.UpdateOptions{})
			return err
		}},
		{w.a, "delete resourceslice", "node B's slice", refused("rdmanet-node/slice-own-node"), func(ctx context.Context, id *identity) error {
			return id.cs.ResourceV1().ResourceSlices().Delete(ctx, "slice-b", metav1.DeleteOptions{})
		}},
		{w.a, "delete resourceslice", "own slice", allowed(), func(ctx context.Context, id *identity) error {
			return id.cs.ResourceV1().ResourceSlices().Delete(ctx, "slice-a", metav1.DeleteOptions{})
		}},
		// ResourceClaims
		{w.a, "apply resourceclaims/status devices (SetClaimNetworks)", "claim allocated on own node", allowed(), func(ctx context.Context, id *identity) error {
			return source(id).SetClaimNetworks(ctx, claimNet(claimA, nodeA))
		}},
		{w.a, "apply resourceclaims/status devices (SetClaimNetworks)", "claim allocated on node B", invalid(`verb="[arbitrary-node:patch]"`), func(ctx context.Context, id *identity) error {
			return source(id).SetClaimNetworks(ctx, claimNet(claimB, nodeB))
		}},
		{w.a, "patch resourceclaims/status (any write)", "claim allocated on node B", refused("rdmanet-node/claim-on-own-node"),
			claimStatusPatch(claimB, `{"metadata":{"annotations":{"touched-by":"node-a"}}}`)},
		// Kubernetes' own check (resourceclaims/binding, which no node identity has) comes first here.
		{w.a, "patch resourceclaims/status reservedFor", "claim allocated on node B", invalid("resourceclaims/binding"),
			claimStatusPatch(claimB, `{"status":{"reservedFor":[{"resource":"pods","name":"attacker","uid":"u-attacker"}]}}`)},
		{w.a, "patch resourceclaims/status reservedFor", "claim allocated on own node", invalid("resourceclaims/binding"),
			claimStatusPatch(claimA, `{"status":{"reservedFor":[{"resource":"pods","name":"attacker","uid":"u-attacker"}]}}`)},
		{w.a, "patch resourceclaims/status: deallocate", "claim allocated on own node", invalid("resourceclaims/binding"),
			claimStatusPatch(claimA, `{"status":{"allocation":null,"reservedFor":null,"devices":null}}`)},
		{w.b, "apply resourceclaims/status devices (SetClaimNetworks)", "claim allocated on own node", allowed(), func(ctx context.Context, id *identity) error {
			return source(id).SetClaimNetworks(ctx, claimNet(claimB, nodeB))
		}},
		{w.a, "delete resourceclaim", "claim allocated on own node", rbacRefused("delete resource \"resourceclaims\""), func(ctx context.Context, id *identity) error {
			return id.cs.ResourceV1().ResourceClaims(w.ns).Delete(ctx, claimA.Name, metav1.DeleteOptions{})
		}},
		// Nodes
		{w.a, "patch node annotation rdmanet.io/rdma-netns-mode (NodeAnnotator)", "own Node", allowed(), func(ctx context.Context, id *identity) error {
			return annotate(ctx, id)
		}},
		{w.a, "patch node annotation rdmanet.io/rdma-netns-mode", "node B", refused("rdmanet-node/node-own"),
			nodePatch(nodeB, `{"metadata":{"annotations":{"rdmanet.io/rdma-netns-mode":"exclusive"}}}`)},
		{w.a, "patch node label", "own Node", refused("rdmanet-node/node-rdmanet-annotations-only"),
			nodePatch(nodeA, `{"metadata":{"labels":{"feature.node.kubernetes.io/rdma.capable":"false"}}}`)},
		{w.a, "patch node annotation outside rdmanet.io/", "own Node", refused("rdmanet-node/node-rdmanet-annotations-only"),
			nodePatch(nodeA, `{"metadata":{"annotations":{"example.com/x":"y"}}}`)},
		{w.a, "patch node spec (taint)", "own Node", refused("rdmanet-node/node-rdmanet-annotations-only"),
			nodePatch(nodeA, `{"spec":{"unschedulable":true}}`)},
		{w.unbound, "patch node annotation rdmanet.io/rdma-netns-mode", "node A", refused("rdmanet-node/bound-token"),
			nodePatch(nodeA, `{"metadata":{"annotations":{"rdmanet.io/rdma-netns-mode":"exclusive"}}}`)},
		// reads stay as RBAC has them
		{w.a, "list secrets", "cluster", rbacRefused("list resource \"secrets\""), func(ctx context.Context, id *identity) error {
			_, err := id.cs.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
			return err
		}},
		{w.a, "create serviceaccounts/token (mint a token for node B)", "rdmanet-daemon", rbacRefused("create resource \"serviceaccounts/token\""), func(ctx context.Context, id *identity) error {
			_, err := id.cs.CoreV1().ServiceAccounts(systemNS).CreateToken(ctx, nodeSA, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
				BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: w.nodePodB.Name, UID: w.nodePodB.UID}}}, metav1.CreateOptions{})
			return err
		}},
	}
	var table strings.Builder
	fmt.Fprintf(&table, "| identity | verb | object | expected | got |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		name := r.who.name + "/" + r.verb + "/" + r.object
		ok := t.Run(name, func(t *testing.T) {
			err := r.call(ctx, r.who)
			code, msg := 0, ""
			if err != nil {
				code, msg = statusOf(err)
			}
			fmt.Fprintf(&table, "| %s | %s | %s | %s | %d %s |\n", r.who.name, r.verb, r.object, r.want, code, firstLine(msg))
			if code != r.want.code || (r.want.code != 0 && !strings.Contains(msg, r.want.rule)) {
				t.Fatalf("got %d %v; want %s", code, err, r.want)
			}
		})
		if !ok {
			continue
		}
	}
	t.Logf("identity × verb × object:\n%s", table.String())

	// What the refused writes would have changed is unchanged.
	if b := mustGetBlock(t, adminStore, blockB); b.Spec.Node != nodeB || b.Spec.Allocations[addrB].ContainerID != "cb" {
		t.Errorf("node B's block after node A's refused writes: %+v", b.Spec)
	}
	if p, err := w.admin.CoreV1().Pods(w.ns).Get(ctx, w.podB.Name, metav1.GetOptions{}); err != nil || p.Labels["stolen"] != "" {
		t.Errorf("pod B: %v %v", p.Labels, err)
	}

	t.Run("expired token copied off node A", func(t *testing.T) {
		expired, err := w.api.ResignServiceAccountToken(w.a.token, func(c map[string]any) {
			now := time.Now()
			c["exp"], c["iat"], c["nbf"] = now.Add(-10*time.Minute).Unix(), now.Add(-70*time.Minute).Unix(), now.Add(-70*time.Minute).Unix()
		})
		if err != nil {
			t.Fatal(err)
		}
		// the same claims, re-signed, before their expiry: accepted (the
		// re-signing is not what the server refuses)
		fresh, err := w.api.ResignServiceAccountToken(w.a.token, func(map[string]any) {})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := newIdentity(t, w.api, nodeA, fresh).cs.CoreV1().Pods(w.ns).Get(ctx, w.podA.Name, metav1.GetOptions{}); err != nil {
			t.Fatalf("re-signed unexpired token of node A: %v", err)
		}
		_, err = newIdentity(t, w.api, nodeA, expired).cs.CoreV1().Pods(w.ns).Get(ctx, w.podA.Name, metav1.GetOptions{})
		if !apierrors.IsUnauthorized(err) {
			t.Fatalf("expired token of node A: %v, want 401 Unauthorized", err)
		}
	})
	t.Run("token of a deleted rdmanet-node pod", func(t *testing.T) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "rdmanet-node-gone", Namespace: systemNS},
			Spec: corev1.PodSpec{NodeName: nodeA, ServiceAccountName: nodeSA, Containers: []corev1.Container{{Name: "c", Image: "rdmanet/rdmanet"}}}}
		p, err := w.admin.CoreV1().Pods(systemNS).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		id := newIdentity(t, w.api, nodeA, mint(t, w.admin, p))
		if _, err := id.cs.CoreV1().Pods(w.ns).Get(ctx, w.podA.Name, metav1.GetOptions{}); err != nil {
			t.Fatalf("token of the running pod: %v", err)
		}
		if err := w.admin.CoreV1().Pods(systemNS).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		// The API server caches a token's authentication for a few seconds
		// (kube-apiserver's token cache): wait out that cache, not more.
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			_, err := id.cs.CoreV1().Pods(w.ns).Get(ctx, w.podA.Name, metav1.GetOptions{})
			if apierrors.IsUnauthorized(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("token of the deleted pod after 60 s: %v, want 401 Unauthorized", err)
			}
		}
	})
}

func nadClient(cfg *rest.Config) (nadclient.Interface, error) { return nadclient.NewForConfig(cfg) }

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 140 {
		s = s[:140] + "…"
	}
	return s
}

func mustGetBlock(t *testing.T, s *ipam.KubeStore, name string) *v1alpha1.IPAMBlock {
	t.Helper()
	b, err := s.Get(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// freeAddr is an address of b's CIDR no allocation holds.
func freeAddr(t *testing.T, b *v1alpha1.IPAMBlock) string {
	p := netip.MustParsePrefix(b.Spec.CIDR)
	for a := p.Addr().Next(); p.Contains(a); a = a.Next() {
		if _, used := b.Spec.Allocations[a.String()]; !used {
			return a.String()
		}
	}
	t.Fatalf("block %s is full", b.Name)
	return ""
}

// annotate runs rdmanet-agent's NodeAnnotator as id until its Node carries
// the annotation (the agent retries failed writes, so a refusal shows as
// the annotation never appearing: then the direct patch's error is returned).
func annotate(ctx context.Context, id *identity) error {
	ann, err := agent.NewNodeAnnotator(id.cs, id.name, nil)
	if err != nil {
		return err
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	go ann.Run(actx)
	ann.Observe(inventory.NetnsShared)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		n, err := id.cs.CoreV1().Nodes().Get(ctx, id.name, metav1.GetOptions{})
		if err == nil && n.Annotations[agent.AnnotationNetnsMode] == inventory.NetnsShared {
			return nil
		}
	}
	_, err = id.cs.CoreV1().Nodes().Patch(ctx, id.name, k8stypes.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+agent.AnnotationNetnsMode+`":"`+inventory.NetnsShared+`"}}}`), metav1.PatchOptions{})
	if err == nil {
		err = errors.New("NodeAnnotator did not annotate the Node in 30 s, yet a direct patch passed")
	}
	return err
}

// TestHostToken: the host-side binaries' kubeconfig (as rdmanet-install
// writes it) reads the node token file; rdmanet-agent's refresher replaces
// it on rotation and the next call works with the new token; once the
// token in the file has expired, loading the kubeconfig fails closed
// naming the file and the expiry, and the API server refuses the token too.
func TestHostToken(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	dir := t.TempDir()
	projected := filepath.Join(dir, "projected", "token")
	hostToken := filepath.Join(dir, "etc/cni/net.d/rdmanet.d/token")
	caFile := w.api.Config().CAFile
	kubeconfig := filepath.Join(dir, "etc/cni/net.d/rdmanet-ipam.d/rdmanet-ipam.kubeconfig")
	if err := os.MkdirAll(filepath.Dir(kubeconfig), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kubeconfig, install.Kubeconfig("rdmanet-ipam", w.api.Config().Host, caFile, hostToken), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(projected), 0o700); err != nil {
		t.Fatal(err)
	}
	r := &nodetoken.Refresher{Source: projected, Dest: hostToken}
	rotate := func(token string) {
		t.Helper()
		if err := os.WriteFile(projected, []byte(token), 0o400); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(projected, 0o600); err != nil {
			t.Fatal(err)
		}
		if wrote, err := r.Sync(); err != nil || !wrote {
			t.Fatalf("refresher: wrote %v, %v", wrote, err)
		}
	}
	call := func() error { // what rdmanet-ipam-direct does per call
		rc, err := ipam.RESTConfigFromKubeconfig(kubeconfig)
		if err != nil {
			return err
		}
		s, err := ipam.NewKubeStore(rc)
		if err != nil {
			return err
		}
		_, err = s.List(ctx, ipam.Pool{}, nodeA)
		return err
	}
	rotate(mint(t, w.admin, w.nodePodA))
	if err := call(); err != nil {
		t.Fatalf("with the first token: %v", err)
	}
	first, _ := os.ReadFile(hostToken)
	rotate(mint(t, w.admin, w.nodePodA)) // kubelet's rotation
	if second, _ := os.ReadFile(hostToken); bytes.Equal(first, second) {
		t.Fatal("rotation did not change the host token")
	}
	if err := call(); err != nil {
		t.Fatalf("after a rotation: %v", err)
	}
	if st, err := os.Stat(hostToken); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("host token: %v %v, want mode 0600", st, err)
	}

	// The pod is gone and the time has passed: the host file holds a token
	// past its expiry.
	exp := time.Now().Add(-5 * time.Minute).Truncate(time.Second)
	expired, err := w.api.ResignServiceAccountToken(string(first), func(c map[string]any) {
		c["exp"], c["iat"], c["nbf"] = exp.Unix(), exp.Add(-time.Hour).Unix(), exp.Add(-time.Hour).Unix()
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(projected, []byte(expired), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Sync(); !errors.Is(err, nodetoken.ErrExpired) {
		t.Fatalf("refresher given an expired projected token: %v, want ErrExpired (the host file kept)", err)
	}
	if err := os.WriteFile(hostToken, []byte(expired), 0o600); err != nil {
		t.Fatal(err)
	}
	err = call()
	if !errors.Is(err, nodetoken.ErrExpired) || !strings.Contains(err.Error(), hostToken) || !strings.Contains(err.Error(), exp.UTC().Format(time.RFC3339)) {
		t.Fatalf("rdmanet-ipam with an expired host token: %v; want ErrExpired naming %s and %s", err, hostToken, exp.UTC().Format(time.RFC3339))
	}
	metaKubeconfig := filepath.Join(dir, "rdmanet.kubeconfig")
	if err := os.WriteFile(metaKubeconfig, install.Kubeconfig("rdmanet", w.api.Config().Host, caFile, hostToken), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.NewKubeSource(metaKubeconfig, 0); !errors.Is(err, nodetoken.ErrExpired) || !strings.Contains(err.Error(), hostToken) {
		t.Fatalf("rdmanet-direct's source with an expired host token: %v, want ErrExpired naming %s", err, hostToken)
	}
	// And the API server, asked anyway, refuses it.
	if _, err := newIdentity(t, w.api, nodeA, expired).cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Fatalf("API server given the expired token: %v, want 401", err)
	}
}
