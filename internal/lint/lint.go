// Package lint checks Kubernetes manifests of RDMA training workloads against
// the rules of the seed documents: it decides each workload's RDMA mode from
// the evidence in its pod template, and checks every workload against the
// NetworkAttachmentDefinitions, device plugin pools and Services of the same
// input. Findings carry a stable rule ID (see Catalogue and
// docs/lint-rules.md), a severity, the object, the field, a message and a fix.
package lint

import (
	"fmt"
	"sort"
	"strings"

	"github.com/rdmanet/rdmanet/internal/manifest"
)

// Modes a workload can be in.
const (
	ModeExclusive = "exclusive" // SR-IOV VF per pod
	ModeShared    = "shared"    // shared HCA, secondary (macvlan) net
	ModeHost      = "host"      // hostNetwork + RDMA
	ModeTCP       = "tcp"       // no RDMA on the data path
	ModeUnknown   = "unknown"
)

// Annotations understood by lint.
const (
	// DisableAnnotation on an object (or a pod template) lists rule IDs not
	// to report for it: "RDMA070,RDMA051".
	DisableAnnotation = "lint.rdmanet.io/disable"
	// NodeExclusiveAnnotation declares that the workload is placed on whole
	// nodes, which makes fixed hostNetwork ports harmless (RDMA051 → info).
	NodeExclusiveAnnotation = "rdmanet.io/node-exclusive"
)

// Finding is one rule violation.
type Finding struct {
	Rule     string   `json:"rule"`
	Severity Severity `json:"severity"`
	Object   string   `json:"object"`
	Field    string   `json:"field"`
	Message  string   `json:"message"`
	Fix      string   `json:"fix"`

	// workload is the index into Result.Workloads the finding belongs to,
	// -1 for non-workload objects.
	workload int
	// source is file:line of the object (text output only).
	source string
}

// Workload is one pod template of the input with its decided mode.
type Workload struct {
	Kind      string   `json:"kind"`
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Mode      string   `json:"mode"`
	Evidence  []string `json:"evidence"`

	source string // file:line of the owner (text output only)
}

// Result is the outcome of linting one input.
type Result struct {
	Workloads []Workload `json:"workloads"`
	Findings  []Finding  `json:"findings"`
}

// Count returns the number of findings of a severity.
func (r *Result) Count(s Severity) int {
	n := 0
	for _, f := range r.Findings {
		if f.Severity == s {
			n++
		}
	}
	return n
}

// Fails tells whether any finding is at or above the threshold severity.
func (r *Result) Fails(threshold Severity) bool {
	for _, f := range r.Findings {
		if f.Severity.rank() >= threshold.rank() {
			return true
		}
	}
	return false
}

// MaxSeverity is the highest severity among the findings ("" if none).
func (r *Result) MaxSeverity() Severity {
	var m Severity
	for _, f := range r.Findings {
		if f.Severity.rank() > m.rank() {
			m = f.Severity
		}
	}
	return m
}

// Lint checks the objects. Objects whose pod templates do not decode are
// reported as *manifest.ParseError (the caller treats that as unparseable
// input); everything else becomes findings.
func Lint(objs []*manifest.Object) (*Result, error) {
	in, err := index(objs)
	if err != nil {
		return nil, err
	}
	c := &checker{in: in, res: &Result{Workloads: []Workload{}, Findings: []Finding{}}}
	c.checkPools()
	c.checkNADs()
	c.checkClaims()
	for _, w := range in.workloads {
		c.checkWorkload(w)
	}
	c.checkClusterPolicy()
	sortFindings(c.res.Findings)
	return c.res, nil
}

type checker struct {
	in  *inputIndex
	res *Result
	cur int // current workload index, -1 outside workloads
}

// add records a finding with the catalogue severity.
func (c *checker) add(rule string, obj *manifest.Object, field, msg, fix string) {
	r, ok := ruleByID[rule]
	if !ok {
		panic("lint: unknown rule " + rule)
	}
	c.addSev(rule, r.Severity, obj, field, msg, fix)
}

func (c *checker) addSev(rule string, sev Severity, obj *manifest.Object, field, msg, fix string) {
	if disabled(obj.Annotations, rule) {
		return
	}
	if c.cur >= 0 {
		w := c.in.workloads[c.cur]
		if disabled(w.t.Meta.Annotations, rule) {
			return
		}
	}
	if fix == "" {
		fix = sentenceToClause(ruleByID[rule].Fix)
	}
	c.res.Findings = append(c.res.Findings, Finding{Rule: rule, Severity: sev, Object: obj.Ref(), Field: field, Message: msg, Fix: fix, workload: c.cur, source: obj.Source.String()})
}

func disabled(ann map[string]string, rule string) bool {
	v, ok := ann[DisableAnnotation]
	if !ok {
		return false
	}
	for _, id := range strings.Split(v, ",") {
		if strings.EqualFold(strings.TrimSpace(id), rule) {
			return true
		}
	}
	return false
}

func sortFindings(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		if a.Object != b.Object {
			return a.Object < b.Object
		}
		if a.Severity.rank() != b.Severity.rank() {
			return a.Severity.rank() > b.Severity.rank()
		}
		if a.Rule != b.Rule {
			return a.Rule < b.Rule
		}
		return a.Field < b.Field
	})
}

func quoteList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return strings.Join(q, ", ")
}

// sentenceToClause turns a catalogue sentence ("Set X.") into the clause
// style of specific fixes ("set X"), leaving identifiers (IPC_LOCK) alone.
func sentenceToClause(s string) string {
	s = strings.TrimSuffix(s, ".")
	if len(s) > 1 && s[0] >= 'A' && s[0] <= 'Z' && s[1] >= 'a' && s[1] <= 'z' {
		s = string(s[0]+('a'-'A')) + s[1:]
	}
	return s
}
