package lint

import (
	"sort"
	"strings"

	"github.com/rdmanet/rdmanet/internal/manifest"
)

// Admission entry points: the rdmanet-controller's validating webhook lints
// one Pod at a time, together with the NetworkAttachmentDefinitions it
// references (read from the cluster), through the same rule engine as
// `kubectl rdma lint`.

// contextRules need objects an admission request does not carry (the owner
// of a controller-created pod, the rendezvous Service, the other replicas):
// LintPod reports them at most as warnings.
var contextRules = map[string]bool{
	"RDMA080": true, "RDMA081": true, "RDMA082": true, "RDMA083": true, "RDMA084": true,
	"RDMA085": true, "RDMA086": true, "RDMA087": true, "RDMA088": true,
	"RDMA093": true,
}

// cannotStartRules are the rules whose error-level finding means the pod,
// as created, can never start: its sandbox's network setup fails on every
// retry, and the fields at fault (containers' resources) cannot change
// after creation, or the annotation is one no CNI reads. The admission
// webhook refuses such a pod for everyone; every other rule is about risk
// (a job that hangs across nodes or trains over TCP) and refuses only
// where a pod or namespace opts into enforcement.
var cannotStartRules = map[string]string{
	"RDMA001": "Multus and rdmanet's meta CNI cannot parse the networks annotation, so every sandbox creation fails",
	"RDMA010": "the NAD's resource is not requested, so no device of it is allocated and the attachment's CNI ADD fails on every retry",
	"RDMA014": "the NAD's resource is not requested, so no device of it is allocated and the attachment's CNI ADD fails on every retry",
	"RDMA016": "an attachment gets no device of the NAD's resource, and its CNI ADD fails on every retry",
}

// CannotStart reports whether f, a finding on a pod, means the pod can
// never start (an error of a rule in CannotStartRules).
func CannotStart(f Finding) bool {
	_, ok := cannotStartRules[f.Rule]
	return ok && f.Severity == Error
}

// CannotStartRules lists the IDs of the rules whose error findings mean a
// pod can never start, sorted.
func CannotStartRules() []string {
	out := make([]string, 0, len(cannotStartRules))
	for id := range cannotStartRules {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// CannotStartReason says why an error of rule id keeps a pod from ever
// starting ("" for rules about risk).
func CannotStartReason(id string) string { return cannotStartRules[id] }

// PodResult is the outcome of linting one pod for admission.
type PodResult struct {
	// Mode is the RDMA mode lint decided for the pod (ModeExclusive, ...).
	Mode     string
	Evidence []string
	// Findings are those on the pod itself (findings on the NADs given as
	// context are left to `kubectl rdma lint`), with the rules that need
	// objects outside the request lowered to warnings.
	Findings []Finding
}

// LintPod lints pod (a decoded Pod object) with the context objects (the
// NADs it references). It returns only the findings on the pod.
func LintPod(pod *manifest.Object, context []*manifest.Object) (*PodResult, error) {
	objs := append([]*manifest.Object{pod}, context...)
	res, err := Lint(objs)
	if err != nil {
		return nil, err
	}
	out := &PodResult{Mode: ModeUnknown, Findings: []Finding{}}
	if len(res.Workloads) > 0 {
		out.Mode = res.Workloads[0].Mode
		out.Evidence = res.Workloads[0].Evidence
	}
	for _, f := range res.Findings {
		if f.workload != 0 || f.Object != pod.Ref() {
			continue
		}
		if contextRules[f.Rule] && f.Severity == Error {
			f.Severity = Warning
		}
		out.Findings = append(out.Findings, f)
	}
	return out, nil
}

// RuleName is the catalogue name of a rule ID ("" when unknown).
func RuleName(id string) string {
	if r, ok := ruleByID[id]; ok {
		return r.Name
	}
	return ""
}

// NADMode classifies a NAD's plugin chain the way lint does: ModeExclusive
// (sriov, ib-sriov, host-device), ModeShared (macvlan, ipvlan, ipoib) or ""
// when the chain is not an RDMA network lint knows.
func NADMode(n *manifest.NAD) string {
	switch nadKind(n) {
	case resExclusive:
		return ModeExclusive
	case resShared:
		return ModeShared
	}
	return ""
}

// RDMAResourceWords: every resource name IsRDMAResource accepts contains
// one of these, lowercased (TestNADModeAndRDMAResource checks it). The
// admission webhooks' match condition is built from this list, so the API
// server sends every pod lint would call an RDMA pod by its resources.
var RDMAResourceWords = []string{"rdma", "sriov", "hca", "roce", "infiniband", "shared", "vf"}

// IsRDMAResource tells whether an extended resource name is an RDMA device
// resource by the naming conventions lint uses when no pool is known
// (example.com/sriov_rdma, rdma/hca_shared_devices_a, ...).
func IsRDMAResource(name string) bool {
	if !isExtendedResource(name) {
		return false
	}
	switch guessResourceKind(strings.TrimSpace(name)) {
	case resExclusive, resShared, resRDMA:
		return true
	}
	return false
}
