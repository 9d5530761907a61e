package apiserver

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
)

// TestDryRunCreate: valid objects pass, existing ones through the dry-run
// apply, nothing is persisted, and each rejection names its object.
func TestDryRunCreate(t *testing.T) {
	s := StartT(t)
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(s.Config())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "exists", Namespace: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := func(ns, name string, extra map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"k": "v"}}}
		u.SetNamespace(ns)
		u.SetName(name)
		for k, v := range extra {
			u.Object[k] = v
		}
		return u
	}
	if err := DryRunCreate(ctx, s.Config(), cm("default", "new", nil), cm("default", "exists", nil)); err != nil {
		t.Fatalf("valid objects: %v", err)
	}
	if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "new", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("dry-run created ConfigMap default/new: %v", err)
	}
	err = DryRunCreate(ctx, s.Config(), cm("default", "unknown-field", map[string]any{"spec": "x"}), cm("", "no-namespace", nil), cm("default", "fine", nil))
	if err == nil {
		t.Fatal("invalid objects accepted")
	}
	for _, want := range []string{"ConfigMap default/unknown-field: rejected by the API server", `unknown field "spec"`, "ConfigMap no-namespace: namespaced ConfigMap without metadata.namespace"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "fine") {
		t.Errorf("error %q names a valid object", err)
	}
}
