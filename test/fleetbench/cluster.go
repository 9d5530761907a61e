package fleetbench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
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

	"github.com/rdmanet/rdmanet/internal/agent"
	"github.com/rdmanet/rdmanet/test/apiserver"
)

// The node identity as deploy/ installs it: the rdmanet-node DaemonSet's
// ServiceAccount, whose projected token is bound to the node's pod.
const (
	SystemNamespace = "rdmanet-system"
	NodeSA          = "rdmanet-daemon"
)

// Installed are the files of deploy/ the benchmark applies: the node
// identity's RBAC, the node-restriction policies (every node write passes
// them, as in a cluster), and the DRA DeviceClasses.
var Installed = []string{
	"deploy/namespace.yaml", "deploy/rbac-daemon.yaml", "deploy/rbac-agent.yaml", "deploy/rbac-ipam.yaml",
	"deploy/dra/rbac-dra.yaml", "deploy/dra/deviceclasses.yaml", "deploy/policy/node-restriction.yaml",
}

// ApplyFiles server-side applies every object of the repository files.
func ApplyFiles(ctx context.Context, cfg *rest.Config, files ...string) error {
	root, err := apiserver.RepoRoot()
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			var u unstructured.Unstructured
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			gvk := u.GroupVersionKind()
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				return fmt.Errorf("%s: %s: %w", f, gvk, err)
			}
			var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
			if u.GetNamespace() != "" {
				ri = dyn.Resource(m.Resource).Namespace(u.GetNamespace())
			}
			data, _ := json.Marshal(u.Object)
			if _, err := ri.Patch(ctx, u.GetName(), k8stypes.ApplyPatchType, data,
				metav1.PatchOptions{FieldManager: "fleetbench", Force: ptr.To(true)}); err != nil {
				return fmt.Errorf("apply %s %s/%s: %w", f, gvk.Kind, u.GetName(), err)
			}
		}
	}
	return nil
}

// Identity is one node's credential: a token of NodeSA bound to the node's
// rdmanet-node pod, which the API server turns into a user with the extra
// authentication.kubernetes.io/node-name the policies read.
type Identity struct {
	Node string
	Cfg  *rest.Config
}

// CreateNodes creates the Node objects, the rdmanet-node pod bound to each
// and its token, with conc requests at a time.
func CreateNodes(ctx context.Context, admin kubernetes.Interface, adminCfg *rest.Config, names []string, conc int) ([]Identity, error) {
	ids := make([]Identity, len(names))
	err := parallel(ctx, len(names), conc, func(i int) error {
		name := names[i]
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
		if _, err := admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create node %s: %w", name, err)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "rdmanet-node-" + name, Namespace: SystemNamespace, Labels: map[string]string{"app": "rdmanet-node"}},
			Spec: corev1.PodSpec{NodeName: name, ServiceAccountName: NodeSA, HostNetwork: true, Containers: []corev1.Container{{Name: "agent", Image: "rdmanet/rdmanet"}}}}
		p, err := admin.CoreV1().Pods(SystemNamespace).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create pod %s: %w", pod.Name, err)
		}
		tr, err := admin.CoreV1().ServiceAccounts(SystemNamespace).CreateToken(ctx, NodeSA, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptr.To[int64](6 * 3600),
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID},
		}}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("token for node %s: %w", name, err)
		}
		ids[i] = Identity{Node: name, Cfg: &rest.Config{Host: adminCfg.Host, BearerToken: tr.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAFile: adminCfg.CAFile}}}
		return nil
	})
	return ids, err
}

// WaitForPolicies waits until the node-restriction policies are enforced:
// node a may not annotate node b (a dry run, which passes admission and
// persists nothing). Policies load asynchronously after they are created.
func WaitForPolicies(ctx context.Context, a Identity, b string) error {
	cs, err := kubernetes.NewForConfig(a.Cfg)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		_, err := cs.CoreV1().Nodes().Patch(ctx, b, k8stypes.MergePatchType, []byte(`{"metadata":{"annotations":{"`+agent.AnnotationNetnsMode+`":"shared"}}}`),
			metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "rdmanet-node-nodes") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node-restriction policy not enforced after 90 s: node %s's patch of node %s got %v", a.Node, b, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// parallel runs fn(0..n-1), conc at a time; the first error wins.
func parallel(ctx context.Context, n, conc int, fn func(i int) error) error {
	if conc < 1 {
		conc = 1
	}
	sem := make(chan struct{}, conc)
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for i := range n {
		mu.Lock()
		stop := first != nil
		mu.Unlock()
		if stop || ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := fn(i); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}
