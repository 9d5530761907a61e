package verify

import (
	"io"
	"strings"

	"github.com/rdmanet/rdmanet/internal/textout"
)

// Result is the outcome over every pod checked:
// {"pods":[Report...],"pairs":PairReport,"summary":{...}}; summary.result
// covers the pairs too.
type Result struct {
	Pods []*Report `json:"pods"`
	// Pairs is the pair layer (absent when it did not run).
	Pairs   *PairReport `json:"pairs,omitempty"`
	Summary Summary     `json:"summary"`
}

// NewResult sums up the pods' reports.
func NewResult(reps []*Report) *Result {
	r := &Result{Pods: reps}
	if r.Pods == nil {
		r.Pods = []*Report{}
	}
	for _, p := range reps {
		r.Summary.OK += p.Summary.OK
		r.Summary.Problem += p.Summary.Problem
		r.Summary.Skip += p.Summary.Skip
		r.Summary.Unknown += p.Summary.Unknown
	}
	switch {
	case r.Summary.Problem > 0:
		r.Summary.Result = string(Problem)
	case r.Summary.Unknown > 0:
		r.Summary.Result = string(Unknown)
	default:
		r.Summary.Result = string(OK)
	}
	return r
}

// WriteJSON writes the machine format.
func (r *Result) WriteJSON(w io.Writer) error {
	return textout.WriteJSON(w, r)
}

// WriteText writes the result for people: per pod a header (node, mode,
// container), then one line per check (layer, check, status, evidence) and
// for problems the fix, then a summary line.
func (r *Result) WriteText(w io.Writer, color bool) error {
	p := &textout.Printer{W: w, Color: color}
	idw := 0
	for _, c := range Catalogue {
		idw = max(idw, len(c.ID))
	}
	for i, rep := range r.Pods {
		if i > 0 {
			p.Printf("\n")
		}
		p.Printf("%s pod %s/%s  node %s  mode %s  container %s\n", p.C(textout.Bold, "kubectl rdma verify"), rep.Namespace, rep.Pod, orDash(rep.Node), rep.Mode, orDash(rep.Container))
		if len(rep.ModeEvidence) > 0 {
			p.Printf("  %s\n", p.C(textout.Dim, "mode evidence: "+strings.Join(rep.ModeEvidence, "; ")))
		}
		for _, c := range rep.Checks {
			st := strings.ToUpper(string(c.Status))
			pad := strings.Repeat(" ", 7-len(st))
			switch c.Status {
			case OK:
				st = p.C(textout.Green, st)
			case Problem:
				st = p.C(textout.Red, st)
			case Unknown:
				st = p.C(textout.Yellow, st)
			case Skip:
				st = p.C(textout.Dim, st)
			}
			p.Printf("  %-7s  %-*s  %s%s  %s\n", c.Layer, idw, c.ID, st, pad, c.Evidence)
			if c.Fix != "" {
				p.Printf("  %-7s  %-*s  %7s  %s %s\n", "", idw, "", "", p.C(textout.Dim, "fix:"), c.Fix)
			}
		}
		s := rep.Summary
		p.Printf("%s: %d ok, %d problem, %d unknown, %d skip\n", resultWord(p, s.Result), s.OK, s.Problem, s.Unknown, s.Skip)
	}
	if len(r.Pods) > 1 {
		s := r.Summary
		p.Printf("\n%s over %d pods: %d ok, %d problem, %d unknown, %d skip\n", resultWord(p, s.Result), len(r.Pods), s.OK, s.Problem, s.Unknown, s.Skip)
	}
	if r.Pairs != nil {
		if len(r.Pods) > 0 {
			p.Printf("\n")
		}
		writePairs(p, r.Pairs)
	}
	return p.Err
}

func resultWord(p *textout.Printer, res string) string {
	w := strings.ToUpper(res)
	switch Status(res) {
	case OK:
		return p.C(textout.Green, w)
	case Problem:
		return p.C(textout.Red, w)
	}
	return p.C(textout.Yellow, w)
}
