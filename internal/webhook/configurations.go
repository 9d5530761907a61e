package webhook

import (
	"encoding/json"
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/rdmanet/rdmanet/internal/lint"
)

// ConfigOptions shape the webhook configurations.
type ConfigOptions struct {
	// Name of both configurations (DefaultConfigurationName).
	Name string
	// Service the API server calls (ignored when URL is set).
	ServiceName, ServiceNamespace string
	ServicePort                   int32
	// URL, when set, is the base URL of the webhook server
	// ("https://127.0.0.1:9443"); the paths are appended.
	URL string
	// CABundle to put in clientConfig (nil: left for the certificate
	// manager or cert-manager's CA injector to fill).
	CABundle []byte
	// MutatingFailurePolicy defaults to Ignore, ValidatingFailurePolicy to
	// Fail (docs/webhook.md explains why).
	MutatingFailurePolicy, ValidatingFailurePolicy admissionregistrationv1.FailurePolicyType
	// ExcludeNamespaces are never sent to the webhooks
	// (kubernetes.io/metadata.name NotIn); kube-system and the controller's
	// namespace are always added.
	ExcludeNamespaces []string
	// NamespaceSelector, when set, replaces the exclusion selector
	// (e.g. opt-in namespaces only). It should still exclude kube-system.
	NamespaceSelector *metav1.LabelSelector
	// TimeoutSeconds of each call (default 5, at most 10).
	TimeoutSeconds int32
}

// RDMACandidateCondition is the CEL match condition of every rdmanet pod
// webhook: the API server sends a pod only when it could be an RDMA pod —
// hostNetwork, a networks annotation (Multus' or TKE's), an rdmanet.io/
// annotation, or a container or init container limiting an extended
// resource whose lowercased name contains one of lint.RDMAResourceWords.
// It is a superset of what ValidatePod checks, so no RDMA pod escapes the
// webhooks, and every other pod (web servers, GPU-only jobs, controllers)
// is admitted without a call: while rdmanet-controller is down,
// failurePolicy Fail refuses only pods that need it.
var RDMACandidateCondition = `(has(object.spec.hostNetwork) && object.spec.hostNetwork) ||
(has(object.metadata.annotations) && object.metadata.annotations.exists(k,
  k == 'k8s.v1.cni.cncf.io/networks' || k == 'tke.cloud.tencent.com/networks' || k.startsWith('rdmanet.io/'))) ||
[object.spec.containers, has(object.spec.initContainers) ? object.spec.initContainers : []].exists(cs,
  cs.exists(c, has(c.resources) && has(c.resources.limits) && c.resources.limits.exists(r,
    [` + celStrings(lint.RDMAResourceWords) + `].exists(w, r.lowerAscii().contains(w)))))`

// celStrings renders words as CEL string literals: 'a', 'b'.
func celStrings(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = "'" + w + "'"
	}
	return strings.Join(q, ", ")
}

// DefaultConfigOptions are the options deploy/ uses.
func DefaultConfigOptions() ConfigOptions {
	return ConfigOptions{
		Name: DefaultConfigurationName, ServiceName: DefaultServiceName, ServiceNamespace: DefaultNamespace, ServicePort: 443,
		MutatingFailurePolicy: admissionregistrationv1.Ignore, ValidatingFailurePolicy: admissionregistrationv1.Fail,
		TimeoutSeconds: 5,
	}
}

// Configurations returns the Mutating- and ValidatingWebhookConfiguration
// for the pod webhooks: pod CREATE only, sideEffects None, admission v1,
// namespaces kube-system and the controller's own excluded, only pods
// matching RDMACandidateCondition sent.
func Configurations(o ConfigOptions) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	d := DefaultConfigOptions()
	if o.Name == "" {
		o.Name = d.Name
	}
	if o.ServiceName == "" {
		o.ServiceName = d.ServiceName
	}
	if o.ServiceNamespace == "" {
		o.ServiceNamespace = d.ServiceNamespace
	}
	if o.ServicePort == 0 {
		o.ServicePort = d.ServicePort
	}
	if o.MutatingFailurePolicy == "" {
		o.MutatingFailurePolicy = d.MutatingFailurePolicy
	}
	if o.ValidatingFailurePolicy == "" {
		o.ValidatingFailurePolicy = d.ValidatingFailurePolicy
	}
	if o.TimeoutSeconds == 0 {
		o.TimeoutSeconds = d.TimeoutSeconds
	}
	for _, fp := range []admissionregistrationv1.FailurePolicyType{o.MutatingFailurePolicy, o.ValidatingFailurePolicy} {
		if fp != admissionregistrationv1.Ignore && fp != admissionregistrationv1.Fail {
			return nil, nil, fmt.Errorf("webhook configuration: failurePolicy %q is neither Ignore nor Fail; use one of them", fp)
		}
	}
	if o.TimeoutSeconds < 1 || o.TimeoutSeconds > 10 {
		return nil, nil, fmt.Errorf("webhook configuration: timeoutSeconds %d is outside 1..10; a pod creation waits for it, use 5", o.TimeoutSeconds)
	}
	client := func(path string) admissionregistrationv1.WebhookClientConfig {
		if o.URL != "" {
			u := o.URL + path
			return admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: o.CABundle}
		}
		p, port := path, o.ServicePort
		return admissionregistrationv1.WebhookClientConfig{CABundle: o.CABundle, Service: &admissionregistrationv1.ServiceReference{Namespace: o.ServiceNamespace, Name: o.ServiceName, Path: &p, Port: &port}}
	}
	nsSel := o.NamespaceSelector
	if nsSel == nil {
		excl := []string{"kube-system", o.ServiceNamespace}
		for _, n := range o.ExcludeNamespaces {
			if n != "kube-system" && n != o.ServiceNamespace {
				excl = append(excl, n)
			}
		}
		nsSel = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: excl}}}
	}
	// The validating side is two webhooks over the same namespaces: one
	// for namespaces labelled NamespaceLabelEnforce=true (EnforcePath:
	// every RDMA pod's errors deny), one for the rest (ValidatePath: only
	// opted-in pods' errors deny). Each namespace reaches exactly one.
	withEnforce := func(op metav1.LabelSelectorOperator) *metav1.LabelSelector {
		sel := nsSel.DeepCopy()
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{Key: NamespaceLabelEnforce, Operator: op, Values: []string{"true"}})
		return sel
	}
	conditions := func() []admissionregistrationv1.MatchCondition {
		return []admissionregistrationv1.MatchCondition{{Name: "rdma-candidate", Expression: RDMACandidateCondition}}
	}
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}, Scope: ptr(admissionregistrationv1.NamespacedScope)},
	}}
	none := admissionregistrationv1.SideEffectClassNone
	equiv := admissionregistrationv1.Equivalent
	never := admissionregistrationv1.NeverReinvocationPolicy
	typeMeta := func(kind string) metav1.TypeMeta {
		return metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: kind}
	}
	labels := map[string]string{"app.kubernetes.io/name": "rdmanet-controller", "app.kubernetes.io/part-of": "rdmanet"}
	mfp, vfp := o.MutatingFailurePolicy, o.ValidatingFailurePolicy
	timeout := o.TimeoutSeconds
	m := &admissionregistrationv1.MutatingWebhookConfiguration{
		TypeMeta:   typeMeta("MutatingWebhookConfiguration"),
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Labels: labels},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "mutate-pod.rdmanet.io", ClientConfig: client(MutatePath), Rules: rules, MatchConditions: conditions(),
			FailurePolicy: &mfp, MatchPolicy: &equiv, NamespaceSelector: nsSel, SideEffects: &none,
			TimeoutSeconds: &timeout, AdmissionReviewVersions: []string{"v1"}, ReinvocationPolicy: &never,
		}},
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta:   typeMeta("ValidatingWebhookConfiguration"),
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Labels: labels},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "validate-pod.rdmanet.io", ClientConfig: client(ValidatePath), Rules: rules, MatchConditions: conditions(),
			FailurePolicy: &vfp, MatchPolicy: &equiv, NamespaceSelector: withEnforce(metav1.LabelSelectorOpNotIn), SideEffects: &none,
			TimeoutSeconds: &timeout, AdmissionReviewVersions: []string{"v1"},
		}, {
			Name: "enforce-pod.rdmanet.io", ClientConfig: client(EnforcePath), Rules: rules, MatchConditions: conditions(),
			FailurePolicy: &vfp, MatchPolicy: &equiv, NamespaceSelector: withEnforce(metav1.LabelSelectorOpIn), SideEffects: &none,
			TimeoutSeconds: &timeout, AdmissionReviewVersions: []string{"v1"},
		}},
	}
	return m, v, nil
}

// ConfigurationsYAML renders Configurations as a two-document YAML stream
// (deploy/controller/webhooks.yaml is this for the defaults).
func ConfigurationsYAML(o ConfigOptions) ([]byte, error) {
	m, v, err := Configurations(o)
	if err != nil {
		return nil, err
	}
	mb, err := cleanYAML(m)
	if err != nil {
		return nil, err
	}
	vb, err := cleanYAML(v)
	if err != nil {
		return nil, err
	}
	head := "# Generated by internal/webhook.ConfigurationsYAML(DefaultConfigOptions()); regenerate with\n" +
		"# go test ./internal/webhook -run TestManifestsUpToDate -update. Do not edit by hand.\n" +
		"# caBundle is filled by rdmanet-controller (Options.ManageCerts) or cert-manager's CA injector.\n"
	return []byte(head + "---\n" + string(mb) + "---\n" + string(vb)), nil
}

// cleanYAML marshals an object without the null creationTimestamp typed
// objects carry.
func cleanYAML(obj any) ([]byte, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	return yaml.Marshal(m)
}

func ptr[T any](v T) *T { return &v }
