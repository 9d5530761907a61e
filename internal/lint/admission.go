package lint

import (
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
