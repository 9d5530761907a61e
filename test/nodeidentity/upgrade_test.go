package nodeidentity_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/test/apiserver"
)

// warnings collects the API server's Warning headers.
type warnings struct {
	mu  sync.Mutex
	all []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all = append(w.all, text)
}

func (w *warnings) has(s string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.ContainsFunc(w.all, func(x string) bool { return strings.Contains(x, s) })
}

// policyAuditActions reads deploy/components/policy-audit: one JSON patch
// replacing every rdmanet ValidatingAdmissionPolicyBinding's
// validationActions; it returns the value.
func policyAuditActions(t *testing.T) []admissionv1.ValidationAction {
	t.Helper()
	root, err := apiserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "deploy/components/policy-audit/kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Patches    []struct {
			Target map[string]string `json:"target"`
			Patch  string            `json:"patch"`
		} `json:"patches"`
	}
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		t.Fatal(err)
	}
	if k.Kind != "Component" || len(k.Patches) != 1 || k.Patches[0].Target["kind"] != "ValidatingAdmissionPolicyBinding" ||
		k.Patches[0].Target["labelSelector"] != "app.kubernetes.io/part-of=rdmanet" {
		t.Fatalf("deploy/components/policy-audit: %+v, want one patch of rdmanet's ValidatingAdmissionPolicyBindings", k)
	}
	var ops []struct {
		Op    string                         `json:"op"`
		Path  string                         `json:"path"`
		Value []admissionv1.ValidationAction `json:"value"`
	}
	if err := yaml.UnmarshalStrict([]byte(k.Patches[0].Patch), &ops); err != nil {
		t.Fatal(err)
	}
	if len(ops) != 1 || ops[0].Op != "replace" || ops[0].Path != "/spec/validationActions" || slices.Contains(ops[0].Value, admissionv1.Deny) {
		t.Fatalf("deploy/components/policy-audit patch %+v: want validationActions replaced without Deny", ops)
	}
	return ops[0].Value
}

// setActions sets the validationActions of every rdmanet binding.
func setActions(t *testing.T, admin kubernetes.Interface, actions []admissionv1.ValidationAction) {
	t.Helper()
	ctx := context.Background()
	l, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/part-of=rdmanet"})
	if err != nil || len(l.Items) == 0 {
		t.Fatalf("rdmanet's policy bindings: %v %v", l, err)
	}
	for _, b := range l.Items {
		b.Spec.ValidationActions = actions
		if _, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Update(ctx, &b, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUpgradeWindow: the upgrade from Secret tokens (docs/deploy.md
// "Upgrading to node-bound tokens"). A node that has not rolled yet still
// holds a pre-0.3 credential: a token of the node ServiceAccount without a
// node binding, and for IPAM one of the old rdmanet-ipam ServiceAccount
// (with its old binding). With the policies in the policy-audit
// component's mode its writes pass with a warning naming the rule; once
// deploy/ is applied alone (Deny) they are refused, while the rolled node's
// bound token keeps working.
func TestUpgradeWindow(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	admin := w.admin
	// What a 0.2 install left: ServiceAccount rdmanet-ipam and its binding.
	if _, err := admin.CoreV1().ServiceAccounts(systemNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "rdmanet-ipam"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "rdmanet-ipam"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "rdmanet-ipam"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "rdmanet-ipam", Namespace: systemNS}}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	oldIPAMToken := mintSA(t, admin, "rdmanet-ipam")
	warn := &warnings{}
	legacy := func(token string) (*identity, *ipam.Allocator) {
		id := newIdentity(t, w.api, "legacy", token)
		id.cfg.WarningHandler = warn
		cs, err := kubernetes.NewForConfig(id.cfg)
		if err != nil {
			t.Fatal(err)
		}
		id.cs = cs
		store, err := ipam.NewKubeStore(id.cfg)
		if err != nil {
			t.Fatal(err)
		}
		return id, &ipam.Allocator{Store: store, Node: nodeA, Lock: &ipam.FileLock{Dir: t.TempDir()}, StateDir: t.TempDir()}
	}
	oldDaemon, _ := legacy(w.unbound.token)
	_, oldIPAM := legacy(oldIPAMToken)
	rng := func() *ipam.Range {
		c, err := ipam.Parse([]byte(`{"cniVersion":"1.0.0","name":"t","ipam":{"range":"10.95.0.0/24","network_name":"nid-upgrade"}}`), ipam.Env{})
		if err != nil {
			t.Fatal(err)
		}
		return c.Ranges[0]
	}()
	patchStatus := func(id *identity, dry bool) error {
		o := metav1.PatchOptions{}
		if dry {
			o.DryRun = []string{metav1.DryRunAll}
		}
		_, err := id.cs.CoreV1().Pods(w.ns).Patch(ctx, w.podA.Name, k8stypes.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"k8s.v1.cni.cncf.io/network-status":"[]"}}}`), o, "status")
		return err
	}
	waitUntil := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); !ok(); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not in effect after 60 s", what)
			}
		}
	}

	// 1. The roll: bindings in the component's mode.
	setActions(t, admin, policyAuditActions(t))
	t.Cleanup(func() { setActions(t, admin, []admissionv1.ValidationAction{admissionv1.Deny}) })
	waitUntil("policy-audit mode", func() bool { return patchStatus(oldDaemon, true) == nil })
	if err := patchStatus(oldDaemon, false); err != nil {
		t.Fatalf("not-yet-rolled node's daemon token during the roll: %v", err)
	}
	if !warn.has("rdmanet-node/bound-token") {
		t.Errorf("no warning naming the rule during the roll: %v", warn.all)
	}
	if _, err := oldIPAM.Allocate(ctx, "nid-upgrade", rng, ipam.Owner{ContainerID: "old", IfName: "net1"}); err != nil {
		t.Fatalf("not-yet-rolled node's rdmanet-ipam token during the roll: %v", err)
	}
	if err := patchStatus(w.a, false); err != nil {
		t.Fatalf("rolled node's bound token during the roll: %v", err)
	}

	// 2. After the roll: deploy/ alone (Deny).
	setActions(t, admin, []admissionv1.ValidationAction{admissionv1.Deny})
	waitUntil("Deny mode", func() bool { return apierrors.IsForbidden(patchStatus(oldDaemon, true)) })
	if err := patchStatus(oldDaemon, false); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "rdmanet-node/bound-token") {
		t.Fatalf("old daemon token after the roll: %v, want 403 rdmanet-node/bound-token", err)
	}
	if _, err := oldIPAM.Allocate(ctx, "nid-upgrade", rng, ipam.Owner{ContainerID: "old2", IfName: "net1"}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "rdmanet-node/bound-token") {
		t.Fatalf("old rdmanet-ipam token after the roll: %v, want 403 rdmanet-node/bound-token", err)
	}
	if err := patchStatus(w.a, false); err != nil {
		t.Fatalf("rolled node's bound token after the roll: %v", err)
	}
	// 3. The documented clean-up: the old ServiceAccount goes, its tokens die.
	if err := admin.CoreV1().ServiceAccounts(systemNS).Delete(ctx, "rdmanet-ipam", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := admin.RbacV1().ClusterRoleBindings().Delete(ctx, "rdmanet-ipam", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil("old ServiceAccount's token refused", func() bool {
		_, err := oldIPAM.Store.List(ctx, ipam.Pool{}, nodeA)
		return apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err)
	})
}

func mintSA(t *testing.T, admin kubernetes.Interface, sa string) string {
	t.Helper()
	tr, err := admin.CoreV1().ServiceAccounts(systemNS).CreateToken(context.Background(), sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", systemNS, sa, err)
	}
	return tr.Status.Token
}
