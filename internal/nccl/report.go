package nccl

import (
	"fmt"
	"io"
	"strings"

	"github.com/rdmanet/rdmanet/internal/textout"
)

// WriteJSON writes the report for machines.
func (r *Report) WriteJSON(w io.Writer) error {
	return textout.WriteJSON(w, r)
}

// WriteText writes the report for people.
func (r *Report) WriteText(w io.Writer, color bool) error {
	c := func(code, s string) string {
		if !color {
			return s
		}
		return code + s + "\x1b[0m"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", c("\x1b[1m", "NCCL run:"), strings.Join(r.Files, ", "))
	if r.Version != "" {
		fmt.Fprintf(&b, "  version    %s\n", r.Version)
	}
	tcol := "\x1b[32m"
	if !RDMA(r.Transport) {
		tcol = "\x1b[31m"
	}
	gdr := r.GDRVerdict
	switch gdr {
	case "":
		gdr = GDRNo
		if r.GDR {
			gdr = GDRYes
		}
	case GDRPartial:
		net, on := 0, 0
		for _, rk := range r.Ranks {
			net += rk.netChannels()
			on += rk.GDRChannels
		}
		gdr = fmt.Sprintf("partial (%d of %d network channels)", on, net)
	case GDRUnknown:
		gdr = "unknown (no network channel lines)"
	}
	t := r.Transport
	if t == TransportIB && r.LinkLayer == "" {
		t += " (NET/IB; the log does not name the link layer)"
	}
	fmt.Fprintf(&b, "  transport  %s   GPUDirect RDMA %s\n", c(tcol, t), gdr)
	fmt.Fprintf(&b, "  ranks      %d on %d host(s)", len(r.Ranks), len(r.Hosts))
	if r.NRanks > 0 {
		fmt.Fprintf(&b, " (communicator of %d)", r.NRanks)
	}
	b.WriteString("\n")
	if len(r.HCAs) > 0 {
		fmt.Fprintf(&b, "  HCAs       %s\n", strings.Join(r.HCAs, " "))
	}
	if len(r.OOB) > 0 {
		fmt.Fprintf(&b, "  OOB        %s\n", strings.Join(r.OOB, " "))
	}
	for _, k := range sortedEnv(r.Env) {
		fmt.Fprintf(&b, "  env        %s=%s\n", k, r.Env[k])
	}
	if len(r.Ranks) > 0 {
		fmt.Fprintf(&b, "\n  %-5s %-20s %-7s %-4s %-9s %-4s %s\n", "rank", "host", "pid", "gpu", "transport", "gdr", "hca / oob")
		for _, rk := range r.Ranks {
			rank := "?"
			if rk.Rank >= 0 {
				rank = fmt.Sprint(rk.Rank)
			}
			g := "-"
			switch {
			case rk.GDR:
				g = "yes"
			case rk.GDRChannels > 0:
				g = fmt.Sprintf("%d/%d", rk.GDRChannels, rk.netChannels())
			}
			t := rk.Transport
			if rk.LinkLayer != "" && t != TransportIB && t != TransportRoCE && t != TransportMixed {
				t += "/" + rk.LinkLayer // a verbs plugin: IBext_v8/RoCE
			}
			fmt.Fprintf(&b, "  %-5s %-20s %-7d %-4d %-9s %-4s %s %s\n", rank, rk.Host, rk.PID, rk.Device, t, g, strings.Join(rk.HCAs, ","), rk.OOB)
		}
	}
	if len(r.Rows) > 0 {
		fmt.Fprintf(&b, "\n  nccl-tests %s\n  %14s %12s %12s\n", strings.TrimSpace(r.Test+" (GB/s)"), "size (B)", "busbw oop", "busbw ip")
		for _, row := range r.Rows {
			fmt.Fprintf(&b, "  %14d %12.2f %12.2f\n", row.Size, row.OOPBusBW, row.IPBusBW)
		}
	}
	if r.BusBWAvg != nil {
		fmt.Fprintf(&b, "  avg bus bandwidth %.2f %s\n", *r.BusBWAvg, r.BusBWUnit)
	}
	if bl := r.Baseline; bl != nil {
		fmt.Fprintf(&b, "\n  baseline   %s (transport %s", strings.Join(bl.Files, ", "), bl.Transport)
		if bl.BusBWAvg != nil {
			fmt.Fprintf(&b, ", avg bus bandwidth %.2f %s", *bl.BusBWAvg, r.BusBWUnit)
		}
		b.WriteString(")\n")
		if bl.Speedup != nil {
			fmt.Fprintf(&b, "  speedup    %.2fx average bus bandwidth\n", *bl.Speedup)
		}
		if bl.Largest != nil {
			fmt.Fprintf(&b, "  at %d B   %.2f vs %.2f %s\n", bl.Largest.Size, bl.Largest.BusBW, bl.Largest.Baseline, r.BusBWUnit)
		}
	}
	if len(r.Problems) > 0 {
		b.WriteString("\n")
	}
	for _, p := range r.Problems {
		col := "\x1b[36m"
		switch p.Severity {
		case "error":
			col = "\x1b[31m"
		case "warning":
			col = "\x1b[33m"
		}
		fmt.Fprintf(&b, "  %s %s: %s\n", c(col, fmt.Sprintf("%-7s", p.Severity)), p.Code, p.Message)
		if p.Fix != "" {
			fmt.Fprintf(&b, "          fix: %s\n", p.Fix)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func sortedEnv(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	for i := 1; i < len(ks); i++ {
		for j := i; j > 0 && ks[j] < ks[j-1]; j-- {
			ks[j], ks[j-1] = ks[j-1], ks[j]
		}
	}
	return ks
}
