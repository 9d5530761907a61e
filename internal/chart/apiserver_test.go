package chart

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/rdmanet/rdmanet/test/apiserver"
)

// createNamespace creates the Namespace for real (namespaced objects need
// it to pass admission in a dry run).
func createNamespace(t testing.TB, api *apiserver.Server, ns *unstructured.Unstructured) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(api.Config())
	if err != nil {
		t.Fatal(err)
	}
	_, err = dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(context.Background(), ns.DeepCopy(), metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}
