package apiserver

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// TestServerLifecycle: the harness serves the real API, installs the repo's
// CRDs, and keeps data across an API server restart.
func TestServerLifecycle(t *testing.T) {
	s := StartT(t)
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(s.Config())
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default"}, Data: map[string]string{"k": "v"}}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create configmap: %v", err)
	}
	dc, err := dynamic.NewForConfig(s.Config())
	if err != nil {
		t.Fatal(err)
	}
	blocks := schema.GroupVersionResource{Group: "rdmanet.io", Version: "v1alpha1", Resource: "ipamblocks"}
	if _, err := dc.Resource(blocks).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("IPAMBlock CRD not served: %v", err)
	}

	if err := s.RestartAPIServer(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	got, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "probe", metav1.GetOptions{})
	if err != nil || got.Data["k"] != "v" {
		t.Fatalf("configmap after restart: %v %v", got, err)
	}
}
