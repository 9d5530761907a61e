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
	// InScope tells whether the pod was checked at all (it opts in, lint
	// decides it is an RDMA pod, or it breaks a rule that keeps any pod
	// from starting).
	InScope bool
	Mode    string
	// Message is the denial: every finding that denies, with rule ID,
	// field and fix.
	Message string
	// CannotStart is set when the pod is denied because it could never
	// start (lint.CannotStart findings), whatever its opt-in.
	CannotStart bool
	Warnings    []string
}

// ValidatePod lints pod (decoded from the admission request, namespace set)
// with the NADs it references that exist (nads) and the references that do
// not (missing). opt is the pod's rdmanet.io opt-in (nil: none); enforce is
// set when its namespace is labelled NamespaceLabelEnforce=true.
//
// Error findings fall in two classes:
//
//   - a pod that breaks a rule whose violation means it can never start
//     (lint.CannotStart: a networks annotation no CNI can parse, a network
//     whose NAD's resource the pod does not request, or requests too few
//     of) is denied with the rule ID, every pod, opted in or not, RDMA pod
//     or not: admitting it would leave it in ContainerCreating for good;
//   - every other error is about risk (no IPC_LOCK, NCCL on eth0, a NAD
//     that does not exist yet): it denies an opted-in pod, and any RDMA pod
//     where enforce is set. An RDMA pod that does not opt in, outside such
//     a namespace, is admitted with these errors as warnings: pods written
//     for Multus and the device plugins (the seeds' own Jobs among them)
//     keep working when rdmanet-controller is installed, and kubectl
//     prints what lint would refuse.
//
// Pods that neither opt in nor are RDMA pods by lint's mode decision
// (exclusive, shared, host), and break no rule of the first class, are
// allowed untouched. An opted-in pod that is not in the mode it asked for
// is denied: the mutating webhook did not prepare it (its failurePolicy
// Ignore lets pods through while the controller is unavailable), and
// admitting it would start a training job on TCP sockets.
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
	var fatal []string
	for _, f := range res.Findings {
		if lint.CannotStart(f) {
			fatal = append(fatal, formatFinding(f))
		}
	}
	if !v.InScope {
		if len(fatal) == 0 {
			return v, nil
		}
		// Not an RDMA pod, but it cannot start either: refuse it for
		// that alone, and say nothing about RDMA rules.
		v.InScope, v.Allowed, v.CannotStart = true, false, true
		v.Message = cannotStartMessage(pod, "", fatal)
		return v, nil
	}
	var risk []string
	if opt != nil && !modeFits(opt, res.Mode) {
		want, key := opt.Mode, AnnotationMode
		if want == "" {
			want, key = "exclusive or shared", AnnotationNetwork
		}
		risk = append(risk, fmt.Sprintf("opt-in: annotation %s asks for RDMA mode %s, but the pod is in mode %s (%s); the mutating webhook did not prepare it (it lets pods through unchanged while rdmanet-controller is unavailable); fix: create the pod again, or give it what mode %s needs yourself (docs/webhook.md)",
			key, want, res.Mode, strings.Join(res.Evidence, "; "), want))
	}
	for _, m := range missing {
		ns := m.Namespace
		if ns == "" {
			ns = pod.Namespace
		}
		risk = append(risk, fmt.Sprintf("RDMA020 (%s) at metadata.annotations[%s]: network %q references NetworkAttachmentDefinition %s/%s, which does not exist; Multus would fail the pod sandbox; fix: create the NAD or fix the name in the annotation",
			lint.RuleName("RDMA020"), m.Annotation, m.Name, ns, m.Name))
	}
	for _, f := range res.Findings {
		switch {
		case lint.CannotStart(f):
		case f.Severity == lint.Error:
			risk = append(risk, formatFinding(f))
		case f.Severity == lint.Warning:
			v.Warnings = append(v.Warnings, "rdmanet: "+formatFinding(f))
		}
	}
	if opt != nil || enforce {
		// Enforced: every error denies, those that keep the pod from
		// starting first.
		if errs := append(fatal, risk...); len(errs) > 0 {
			v.Allowed, v.CannotStart = false, len(fatal) > 0
			v.Message = fmt.Sprintf("rdmanet: pod %s (RDMA mode %s) breaks %d rule(s) of `kubectl rdma lint`:\n%s\n(suppress a rule for this pod with the annotation %s: \"<RULE>\")",
				podName(pod), res.Mode, len(errs), strings.Join(errs, "\n"), lint.DisableAnnotation)
		}
		return v, nil
	}
	if len(risk) > 0 {
		// Warnings first: kubectl prints them in order.
		head := fmt.Sprintf("rdmanet: pod %s (RDMA mode %s) breaks %d error-level rule(s) of `kubectl rdma lint`; admitted because it does not opt in (annotation %s or %s) and namespace %s is not labelled %s=true, where it would be refused:",
			podName(pod), res.Mode, len(risk), AnnotationNetwork, AnnotationMode, pod.Namespace, NamespaceLabelEnforce)
		if len(fatal) > 0 {
			head = fmt.Sprintf("rdmanet: pod %s (RDMA mode %s) also breaks %d error-level rule(s) of `kubectl rdma lint` that refuse a pod only where enforced (annotation %s or %s, or namespace %s labelled %s=true):",
				podName(pod), res.Mode, len(risk), AnnotationNetwork, AnnotationMode, pod.Namespace, NamespaceLabelEnforce)
		}
		w := []string{head}
		for _, e := range risk {
			w = append(w, "rdmanet: "+e)
		}
		v.Warnings = append(w, v.Warnings...)
	}
	if len(fatal) > 0 {
		v.Allowed, v.CannotStart = false, true
		v.Message = cannotStartMessage(pod, res.Mode, fatal)
	}
	return v, nil
}

// cannotStartMessage is the denial of a pod that could never start; mode
// is its RDMA mode ("" for a pod that is not an RDMA pod).
func cannotStartMessage(pod *manifest.Object, mode string, fatal []string) string {
	what := "pod " + podName(pod)
	if mode != "" {
		what += " (RDMA mode " + mode + ")"
	}
	return fmt.Sprintf("rdmanet: %s could never start: it breaks %d rule(s) of `kubectl rdma lint` that leave a pod in ContainerCreating for good, so it is refused whether or not it opts in:\n%s\n(suppress a rule for this pod with the annotation %s: \"<RULE>\")",
		what, len(fatal), strings.Join(fatal, "\n"), lint.DisableAnnotation)
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
