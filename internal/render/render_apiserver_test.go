package render

import (
	"context"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/rdmanet/rdmanet/test/apiserver"
)

// TestRenderedAPIServer: every rendered object, device plugin and DRA path,
// is accepted by a real kube-apiserver (server-side dry-run create, strict
// field validation; the NAD CRD installed by the harness). Skips without
// .tools/bin (make k8s-tools), fails with CI=true.
func TestRenderedAPIServer(t *testing.T) {
	api := apiserver.StartT(t)
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(api.Config())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ai-training"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		spec Spec
	}{
		{name: "exclusive", spec: specFor(ModeExclusive)},
		{name: "shared", spec: specFor(ModeShared)},
		{name: "host", spec: specFor(ModeHost)},
		{name: "exclusive DRA", spec: draSpec(ModeExclusive)},
		{name: "shared DRA", spec: draSpec(ModeShared)},
		{name: "exclusive DRA, 8 rails for 8 GPUs", spec: draRails(8, 8)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs, err := Render(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			objs := make([]*unstructured.Unstructured, 0, len(docs))
			for _, d := range docs {
				b, err := json.Marshal(d.Object)
				if err != nil {
					t.Fatal(err)
				}
				var u unstructured.Unstructured
				if err := u.UnmarshalJSON(b); err != nil {
					t.Fatal(err)
				}
				objs = append(objs, &u)
			}
			if err := apiserver.DryRunCreate(ctx, api.Config(), objs...); err != nil {
				t.Error(err)
			}
		})
	}
}
