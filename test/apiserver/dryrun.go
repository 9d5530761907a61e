package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// DryRunCreate checks that the API server accepts each object: a create
// with dryRun=All and strict field validation (schema, defaulting and
// admission of the real server), after a discovery RESTMapper lookup that
// also checks the object's metadata.namespace against its kind's scope. An
// object that exists already (a CRD the harness installed) is checked by a
// dry-run server-side apply instead. Nothing is persisted: namespaced
// objects need their namespace created beforehand. It checks every object
// and returns the failures joined, each naming its object (kind
// namespace/name).
func DryRunCreate(ctx context.Context, cfg *rest.Config, objs ...*unstructured.Unstructured) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	var errs []error
	for _, obj := range objs {
		if err := dryRunCreate(ctx, mapper, dyn, obj); err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", obj.GetKind(), objectRef(obj), err))
		}
	}
	return errors.Join(errs...)
}

func objectRef(obj *unstructured.Unstructured) string {
	if ns := obj.GetNamespace(); ns != "" {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}

func dryRunCreate(ctx context.Context, mapper apimeta.RESTMapper, dyn dynamic.Interface, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("RESTMapper: %w", err)
	}
	var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
	switch namespaced := m.Scope.Name() == apimeta.RESTScopeNameNamespace; {
	case namespaced && obj.GetNamespace() == "":
		return fmt.Errorf("namespaced %s without metadata.namespace", gvk.Kind)
	case namespaced:
		ri = dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
	case obj.GetNamespace() != "":
		return fmt.Errorf("cluster-scoped %s with metadata.namespace", gvk.Kind)
	}
	dry := []string{metav1.DryRunAll}
	_, err = ri.Create(ctx, obj.DeepCopy(), metav1.CreateOptions{DryRun: dry, FieldValidation: "Strict"})
	if apierrors.IsAlreadyExists(err) {
		data, jerr := json.Marshal(obj.Object)
		if jerr != nil {
			return jerr
		}
		force := true
		_, err = ri.Patch(ctx, obj.GetName(), k8stypes.ApplyPatchType, data,
			metav1.PatchOptions{DryRun: dry, FieldManager: "rdmanet-dry-run", Force: &force, FieldValidation: "Strict"})
	}
	if err != nil {
		return fmt.Errorf("rejected by the API server: %w", err)
	}
	return nil
}
