package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rdmanet/rdmanet/internal/manifest"
)

// NADGVK is the NetworkAttachmentDefinition kind (deploy/crds).
var NADGVK = schema.GroupVersionKind{Group: "k8s.cni.cncf.io", Version: "v1", Kind: "NetworkAttachmentDefinition"}

// getNAD reads a NAD from the API server as a manifest object; nil, nil
// when it does not exist.
func getNAD(ctx context.Context, r client.Reader, ref NetworkRef) (*manifest.Object, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(NADGVK)
	if err := r.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, u); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read NetworkAttachmentDefinition %s: %w", ref, err)
	}
	return objectFrom(u.Object, "NetworkAttachmentDefinition "+ref.String())
}

// objectFrom turns decoded JSON into a manifest object (the form lint reads).
func objectFrom(v any, what string) (*manifest.Object, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	objs, err := manifest.Parse(what, b)
	if err != nil {
		return nil, err
	}
	if len(objs) != 1 {
		return nil, fmt.Errorf("%s: decoded into %d objects, want 1", what, len(objs))
	}
	return objs[0], nil
}

func decodePod(req admission.Request) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	if err := json.Unmarshal(req.Object.Raw, pod); err != nil {
		return nil, fmt.Errorf("decode pod: %w", err)
	}
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	return pod, nil
}

func isPodCreate(req admission.Request) bool {
	return req.Operation == admissionv1.Create && req.Kind.Kind == "Pod" && req.Kind.Group == "" && req.SubResource == ""
}

// Mutator is the handler of MutatePath.
type Mutator struct {
	// Reader reads NADs (live; the controller needs get on
	// network-attachment-definitions in every namespace).
	Reader client.Reader
}

// Handle implements admission.Handler.
func (m *Mutator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if !isPodCreate(req) {
		return admission.Allowed("rdmanet: not a pod creation")
	}
	pod, err := decodePod(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	opt, err := ParseOptIn(pod, req.Namespace)
	if err != nil {
		return admission.Denied("rdmanet: " + err.Error())
	}
	if opt == nil {
		return admission.Allowed("rdmanet: pod does not opt in")
	}
	var nad *NAD
	if opt.Mode != ModeHost {
		obj, err := getNAD(ctx, m.Reader, opt.Network)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		if obj == nil {
			return admission.Denied(fmt.Sprintf("rdmanet: annotation %s: %q: NetworkAttachmentDefinition %s does not exist; create it (see examples/cluster), or fix the annotation to name an existing NAD as <namespace>/<name>",
				AnnotationNetwork, pod.Annotations[AnnotationNetwork], opt.Network))
		}
		nads := manifest.NADFromObject(obj)
		if len(nads) != 1 {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("NetworkAttachmentDefinition %s: not readable as a NAD", opt.Network))
		}
		if nads[0].ConfigErr != nil {
			return admission.Denied(fmt.Sprintf("rdmanet: annotation %s: %q: NetworkAttachmentDefinition %s has an unusable spec.config: %v; fix the NAD (kubectl rdma lint checks it)",
				AnnotationNetwork, pod.Annotations[AnnotationNetwork], opt.Network, nads[0].ConfigErr))
		}
		nad = NADFromManifest(nads[0])
	}
	out := pod.DeepCopy()
	warnings, err := Mutate(out, opt, nad)
	if err != nil {
		return admission.Denied("rdmanet: " + err.Error())
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	orig, err := json.Marshal(pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	// Diff the typed pod before and after: both marshal the same way, so
	// the patch holds only the mutation (and is empty for a mutated pod).
	resp := admission.PatchResponseFromRaw(orig, raw)
	return resp.WithWarnings(warnings...)
}

// Validator is the handler of ValidatePath (Enforce false) and EnforcePath
// (Enforce true: the namespace is labelled NamespaceLabelEnforce=true, so
// every RDMA pod's errors deny; see ValidatePod).
type Validator struct {
	Reader  client.Reader
	Enforce bool
}

// Handle implements admission.Handler.
func (v *Validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if !isPodCreate(req) {
		return admission.Allowed("rdmanet: not a pod creation")
	}
	pod, err := decodePod(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	opt, err := ParseOptIn(pod, req.Namespace)
	if err != nil {
		return admission.Denied("rdmanet: " + err.Error())
	}
	var raw map[string]any
	if err := json.Unmarshal(req.Object.Raw, &raw); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	obj, err := objectFrom(raw, "admission request")
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if obj.Namespace == "" {
		obj.Namespace = req.Namespace
	}
	var nads []*manifest.Object
	var missing []manifest.NetworkSelection
	if val, ok := pod.Annotations[NetworksAnnotation]; ok {
		// An unparsable annotation is lint's RDMA001.
		sels, _ := manifest.ParseNetworks(NetworksAnnotation, val)
		for _, s := range sels {
			ref := NetworkRef{Namespace: s.Namespace, Name: s.Name}
			if ref.Namespace == "" {
				ref.Namespace = obj.Namespace
			}
			n, err := getNAD(ctx, v.Reader, ref)
			if err != nil {
				return admission.Errored(http.StatusInternalServerError, err)
			}
			if n == nil {
				missing = append(missing, s)
				continue
			}
			nads = append(nads, n)
		}
	}
	verdict, err := ValidatePod(obj, nads, missing, opt, v.Enforce)
	if err != nil {
		return admission.Denied("rdmanet: " + err.Error())
	}
	if !verdict.InScope {
		return admission.Allowed("rdmanet: not an RDMA pod")
	}
	if !verdict.Allowed {
		return admission.Denied(verdict.Message).WithWarnings(verdict.Warnings...)
	}
	return admission.Allowed("rdmanet: RDMA mode " + verdict.Mode).WithWarnings(verdict.Warnings...)
}
