package bench

// The report: each row's line, each run's added times and ratio, and the
// verdict over all runs (pure; unit-tested without a cluster).

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Phases of a run (see Run): the nodes in the exclusive RDMA netns mode,
// then in the shared mode. The plain row runs in both, so each stack is
// compared with plain pods started beside it on nodes in the same mode.
const (
	PhaseExclusive = 1
	PhaseShared    = 2
)

// Percentile is the nearest-rank percentile (p in (0, 100]) of d: the
// smallest sample with at least p% of the samples at or below it. For 16
// samples p50 is the 8th, p99 the 16th (the largest). 0 for no samples.
func Percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

// Batch is one batch of a row: its pods' creation -> Running with net1
// times and its wall time (first create -> last pod ready).
type Batch struct {
	Phase   int
	Samples []time.Duration
	Wall    time.Duration
}

// P50 is the batch's median pod start.
func (b Batch) P50() time.Duration { return Percentile(b.Samples, 50) }

// Result is one row's measurements: its batches in the order they ran.
type Result struct {
	Row     Row
	Batches []Batch
}

// Samples are every batch's samples together.
func (r Result) Samples() []time.Duration {
	var out []time.Duration
	for _, b := range r.Batches {
		out = append(out, b.Samples...)
	}
	return out
}

// Wall is the mean batch wall time.
func (r Result) Wall() time.Duration {
	if len(r.Batches) == 0 {
		return 0
	}
	var t time.Duration
	for _, b := range r.Batches {
		t += b.Wall
	}
	return t / time.Duration(len(r.Batches))
}

// inPhase is the row's batches of one phase, in order.
func (r Result) inPhase(phase int) []Batch {
	var out []Batch
	for _, b := range r.Batches {
		if b.Phase == phase {
			out = append(out, b)
		}
	}
	return out
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

func signed(d time.Duration) string {
	if d >= 0 {
		return "+" + secs(d)
	}
	return "-" + secs(-d)
}

// spread is "median (min..max)" of ds.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%s (%s..%s)", secs(Percentile(ds, 50)), secs(slices.Min(ds)), secs(slices.Max(ds)))
}

// Line is the row's summary line over nodes nodes with pods per batch:
// percentiles over all batches' pods, the mean wall time, and with several
// batches the median and range of the batches' p50s.
func (r Result) Line(nodes, pods int) string {
	s := fmt.Sprintf("cluster-bench: stack=%s mode=%s nodes=%d pods=%d p50=%s p99=%s wall=%s",
		r.Row.Stack, r.Row.Mode, nodes, pods, secs(Percentile(r.Samples(), 50)), secs(Percentile(r.Samples(), 99)), secs(r.Wall()))
	if len(r.Batches) > 1 {
		p50s := make([]time.Duration, len(r.Batches))
		for i, b := range r.Batches {
			p50s[i] = b.P50()
		}
		s += fmt.Sprintf(" batches=%d batch_p50=%s", len(r.Batches), spread(p50s))
	}
	return s
}

// Goal: rdmanet's added pod-start time under a third of Multus + Whereabouts'.
const GoalRatio = 1.0 / 3

// RunReport is run k (the k-th batch of every row): each stack's added
// time, its batch p50 minus the p50 of the plain batch of the same phase
// and index, and the ratio of rdmanet's shared added time to Multus +
// Whereabouts' on the same pods.
type RunReport struct {
	Index    int // from 1
	Added    map[Row]time.Duration
	Ratio    float64
	HasRatio bool
	Why      string // why there is no ratio
}

// Met reports whether the run met the goal.
func (r RunReport) Met() bool { return r.HasRatio && r.Ratio < GoalRatio }

// Runs pairs the rows' batches into runs. A stack's batch k is compared
// with the plain row's batch k of the same phase; a run lacking a plain
// batch there has no added time for that stack.
func Runs(results []Result) []RunReport {
	by := map[Row]Result{}
	runs := 0
	for _, r := range results {
		by[r.Row] = r
	}
	plain, ok := by[RowPlain]
	if !ok {
		return nil
	}
	base := map[int][]Batch{PhaseExclusive: plain.inPhase(PhaseExclusive), PhaseShared: plain.inPhase(PhaseShared)}
	for _, r := range results {
		if r.Row != RowPlain {
			runs = max(runs, len(r.Batches))
		}
	}
	out := make([]RunReport, 0, runs)
	for k := range runs {
		rr := RunReport{Index: k + 1, Added: map[Row]time.Duration{}}
		for _, row := range RowOrder {
			r, ok := by[row]
			if !ok || row == RowPlain || k >= len(r.Batches) {
				continue
			}
			b := r.Batches[k]
			if p := base[b.Phase]; k < len(p) {
				rr.Added[row] = b.P50() - p[k].P50()
			}
		}
		s, sok := rr.Added[RowShared]
		m, mok := rr.Added[RowMultus]
		switch {
		case !sok || !mok:
			rr.Why = "both shared rows needed"
		case m <= 0:
			rr.Why = "multus+whereabouts added no time"
		default:
			rr.Ratio, rr.HasRatio = float64(max(s, 0))/float64(m), true
		}
		out = append(out, rr)
	}
	return out
}

// Line is the run's line.
func (r RunReport) Line() string {
	parts := []string{fmt.Sprintf("cluster-bench: run=%d added p50 over plain:", r.Index)}
	for _, row := range RowOrder {
		if d, ok := r.Added[row]; ok {
			parts = append(parts, fmt.Sprintf("%s %s=%s", row.Stack, row.Mode, signed(d)))
		}
	}
	if r.HasRatio {
		parts = append(parts, fmt.Sprintf("ratio=%.2f", r.Ratio))
	} else {
		parts = append(parts, "ratio=n/a ("+r.Why+")")
	}
	return strings.Join(parts, " ")
}

// Verdict is the final line: per stack the median and range of its added
// time over the runs, and the goal (rdmanet shared's added time under a
// third of Multus + Whereabouts') judged in every run, not on the pooled
// figures: one run that misses it misses the goal.
func Verdict(results []Result) string {
	runs := Runs(results)
	if runs == nil {
		return "cluster-bench: added time: no plain row to compare with"
	}
	parts := []string{fmt.Sprintf("cluster-bench: over %d runs, added p50 over plain, median (range):", len(runs))}
	for _, row := range RowOrder {
		var ds []time.Duration
		for _, r := range runs {
			if d, ok := r.Added[row]; ok {
				ds = append(ds, d)
			}
		}
		if len(ds) > 0 {
			parts = append(parts, fmt.Sprintf("%s %s=%s", row.Stack, row.Mode, spreadSigned(ds)))
		}
	}
	var ratios []float64
	var missed []string
	for _, r := range runs {
		if !r.HasRatio {
			continue
		}
		ratios = append(ratios, r.Ratio)
		if !r.Met() {
			missed = append(missed, fmt.Sprint(r.Index))
		}
	}
	if len(ratios) == 0 {
		return strings.Join(append(parts, "ratio=n/a ("+runs[0].Why+")"), " ")
	}
	sorted := slices.Sorted(slices.Values(ratios))
	med := sorted[(len(sorted)-1)/2]
	verdict := fmt.Sprintf("met in all %d runs", len(ratios))
	if len(missed) > 0 {
		verdict = fmt.Sprintf("missed in run %s (%d of %d met)", strings.Join(missed, ","), len(ratios)-len(missed), len(ratios))
	}
	if len(ratios) < len(runs) {
		verdict += fmt.Sprintf("; %d runs without a ratio", len(runs)-len(ratios))
	}
	parts = append(parts, fmt.Sprintf("ratio=%.2f (%.2f..%.2f) goal < %.2f: %s", med, sorted[0], sorted[len(sorted)-1], GoalRatio, verdict))
	return strings.Join(parts, " ")
}

// spreadSigned is "median (min..max)" of ds with signs (an added time may
// be negative: faster than the plain pods beside it).
func spreadSigned(ds []time.Duration) string {
	return fmt.Sprintf("%s (%s..%s)", signed(Percentile(ds, 50)), signed(slices.Min(ds)), signed(slices.Max(ds)))
}

// Report is a run's outcome: the rows measured over how many nodes.
type Report struct {
	Nodes   int
	Pods    int // per batch
	Results []Result
}

// Lines are the report's lines: one per row, one per run, the verdict.
func (r Report) Lines() []string {
	if len(r.Results) == 0 {
		return nil
	}
	var out []string
	for _, res := range r.Results {
		out = append(out, res.Line(r.Nodes, r.Pods))
	}
	for _, run := range Runs(r.Results) {
		out = append(out, run.Line())
	}
	return append(out, Verdict(r.Results))
}
