package webhook

import (
	"fmt"
	"strings"

	"github.com/rdmanet/rdmanet/internal/lint"
	"github.com/rdmanet/rdmanet/internal/manifest"
)

// Verdict is the validating webhook's answer.
type Verdict struct {
	Allowed bool
	// InScope tells whether the pod was checked at all (it opts in, or lint
	// decides it is an RDMA pod).
	InScope  bool
	Mode     string
	Message  string // the denial: every error finding with rule ID, field and fix
	Warnings []string
}

// ValidatePod lints pod (decoded from the admission request, namespace set)
// with the NADs it references that exist (nads) and the references that do
// not (missing). opt is the pod's rdmanet.io opt-in (nil: none).
// Pods that neither opt in nor are RDMA pods by lint's mode decision
// (exclusive, shared, host) are allowed untouched. An opted-in pod that is
// not in the mode it asked for is denied: the mutating webhook did not
// prepare it (its failurePolicy Ignore lets pods through while the
// controller is unavailable), and admitting it would start a training job
// on TCP sockets.
//
// Error-level findings deny an opted-in pod, and any RDMA pod when enforce
// is set (its namespace is labelled NamespaceLabelEnforce=true). An RDMA pod
// that does not opt in, outside such a namespace, is admitted with its
// errors as warnings: pods written for Multus and the device plugins (the
// seeds' own Jobs among them) keep working when rdmanet-controller is
// installed, and kubectl prints what lint would refuse.
func ValidatePod(pod *manifest.Object, nads []*manifest.Object, missing []manifest.NetworkSelection, opt *OptIn, enforce bool) (Verdict, error) {
	res, err := lint.LintPod(pod, nads)
	if err != nil {
		return Verdict{}, err
	}
	v := Verdict{Allowed: true, Mode: res.Mode}
	switch res.Mode {
	case lint.ModeExclusive, lint.ModeShared, lint.ModeHost:
		v.InScope = true
	default:
		v.InScope = opt != nil
	}
	if !v.InScope {
		return v, nil
	}
	var errs []string
	if opt != nil && !modeFits(opt, res.Mode) {
		want, key := opt.Mode, AnnotationMode
		if want == "" {
			want, key = "exclusive or shared", AnnotationNetwork
		}
		errs = append(errs, fmt.Sprintf("opt-in: annotation %s asks for RDMA mode %s, but the pod is in mode %s (%s); the mutating webhook did not prepare it (it lets pods through unchanged while rdmanet-controller is unavailable); fix: create the pod again, or give it what mode %s needs yourself (docs/webhook.md)",
			key, want, res.Mode, strings.Join(res.Evidence, "; "), want))
	}
	for _, m := range missing {
		ns := m.Namespace
		if ns == "" {
			ns = pod.Namespace
		}
		errs = append(errs, fmt.Sprintf("RDMA020 (%s) at metadata.annotations[%s]: network %q references NetworkAttachmentDefinition %s/%s, which does not exist; Multus would fail the pod sandbox; fix: create the NAD or fix the name in the annotation",
			lint.RuleName("RDMA020"), m.Annotation, m.Name, ns, m.Name))
	}
	for _, f := range res.Findings {
		line := formatFinding(f)
		switch f.Severity {
		case lint.Error:
			errs = append(errs, line)
		case lint.Warning:
			v.Warnings = append(v.Warnings, "rdmanet: "+line)
		}
	}
	if len(errs) > 0 && opt == nil && !enforce {
		// Warnings first: kubectl prints them in order.
		head := fmt.Sprintf("rdmanet: pod %s (RDMA mode %s) breaks %d error-level rule(s) of `kubectl rdma lint`; admitted because it does not opt in (annotation %s or %s) and namespace %s is not labelled %s=true, where it would be refused:",
			podName(pod), res.Mode, len(errs), AnnotationNetwork, AnnotationMode, pod.Namespace, NamespaceLabelEnforce)
		w := []string{head}
		for _, e := range errs {
			w = append(w, "rdmanet: "+e)
		}
		v.Warnings = append(w, v.Warnings...)
		return v, nil
	}
	if len(errs) > 0 {
		v.Allowed = false
		v.Message = fmt.Sprintf("rdmanet: pod %s (RDMA mode %s) breaks %d rule(s) of `kubectl rdma lint`:\n%s\n(suppress a rule for this pod with the annotation %s: \"<RULE>\")",
			podName(pod), res.Mode, len(errs), strings.Join(errs, "\n"), lint.DisableAnnotation)
	}
	return v, nil
}

func modeFits(o *OptIn, mode string) bool {
	if o.Mode != "" {
		return mode == o.Mode
	}
	return mode == lint.ModeExclusive || mode == lint.ModeShared
}

func formatFinding(f lint.Finding) string {
	s := f.Rule
	if n := lint.RuleName(f.Rule); n != "" {
		s += " (" + n + ")"
	}
	if f.Field != "" {
		s += " at " + f.Field
	}
	s += ": " + f.Message
	if f.Fix != "" {
		s += "; fix: " + f.Fix
	}
	return s
}

func podName(o *manifest.Object) string {
	name := o.Name
	if name == "" {
		name = manifest.GetString(o.Data, "metadata.generateName") + "*"
	}
	return o.Namespace + "/" + name
}
