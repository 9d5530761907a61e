package lint

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/rdmanet/rdmanet/internal/textout"
)

// WriteJSON writes the result in the machine format:
// {"workloads":[{"kind","namespace","name","mode","evidence"}],"findings":[{"rule","severity","object","field","message","fix"}]}
func (r *Result) WriteJSON(w io.Writer) error {
	return textout.WriteJSON(w, r)
}

// TextOptions control the human format.
type TextOptions struct {
	Color bool // ANSI colours (only on a terminal)
}

// WriteText writes the result for people: one block per workload (mode,
// evidence, its findings), then the findings on network and pool objects,
// then a summary line.
func (r *Result) WriteText(w io.Writer, opt TextOptions) error {
	p := &printer{Printer: &textout.Printer{W: w, Color: opt.Color}}
	byWorkload := map[int][]Finding{}
	for _, f := range r.Findings {
		byWorkload[f.workload] = append(byWorkload[f.workload], f)
	}
	for i, wl := range r.Workloads {
		p.Printf("%s  mode %s%s\n", p.C(textout.Bold, refOf(wl)), p.C(modeColor(wl.Mode), wl.Mode), p.C(textout.Dim, srcSuffix(wl.source)))
		for _, e := range wl.Evidence {
			p.Printf("  %s %s\n", p.C(textout.Dim, "·"), e)
		}
		p.current = refOf(wl)
		fs := byWorkload[i]
		if len(fs) == 0 {
			p.Printf("  %s\n", p.C(textout.Green, "✓ no findings"))
		}
		for _, f := range fs {
			p.finding(f, "  ")
		}
		p.Printf("\n")
	}
	others := byWorkload[-1]
	if len(others) > 0 {
		p.Printf("%s\n", p.C(textout.Bold, "Networks and device plugin pools"))
		var last string
		for _, f := range others {
			if f.Object != last {
				p.Printf("  %s%s\n", f.Object, p.C(textout.Dim, srcSuffix(f.source)))
				last = f.Object
			}
			p.finding(f, "    ")
		}
		p.Printf("\n")
	}
	p.Printf("%s, %s, %s, %s\n", plural(len(r.Workloads), "workload"),
		p.C(textout.Red, plural(r.Count(Error), "error")),
		p.C(textout.Yellow, plural(r.Count(Warning), "warning")),
		p.C(textout.Cyan, fmt.Sprintf("%d info", r.Count(Info))))
	return p.Err
}

func srcSuffix(s string) string {
	if s == "" {
		return ""
	}
	return "  (" + s + ")"
}

func refOf(w Workload) string {
	if w.Namespace == "" {
		return w.Kind + "/" + w.Name
	}
	return w.Kind + "/" + w.Namespace + "/" + w.Name
}

type printer struct {
	*textout.Printer
	current string // ref of the workload being printed
}

func (p *printer) finding(f Finding, indent string) {
	sev := fmt.Sprintf("%-7s", f.Severity)
	switch f.Severity {
	case Error:
		sev = p.C(textout.Red, sev)
	case Warning:
		sev = p.C(textout.Yellow, sev)
	default:
		sev = p.C(textout.Cyan, sev)
	}
	name := ""
	if r, ok := ruleByID[f.Rule]; ok {
		name = " " + r.Name
	}
	p.Printf("%s%s %s%s\n", indent, sev, f.Rule, p.C(textout.Dim, name))
	pad := indent + "        "
	if f.workload >= 0 && !strings.HasPrefix(f.Object, p.current) {
		p.Printf("%sobject: %s%s\n", pad, f.Object, p.C(textout.Dim, srcSuffix(f.source)))
	}
	if f.Field != "" {
		p.Printf("%sfield: %s\n", pad, f.Field)
	}
	p.Printf("%s%s\n", pad, f.Message)
	if f.Fix != "" {
		p.Printf("%sfix:   %s\n", pad, f.Fix)
	}
}

func modeColor(m string) string {
	switch m {
	case ModeUnknown:
		return textout.Yellow
	case ModeTCP:
		return textout.Dim
	}
	return textout.Green
}

// RulesMarkdown renders the catalogue as docs/lint-rules.md.
func RulesMarkdown() string {
	var b strings.Builder
	b.WriteString("# `kubectl rdma lint` rule catalogue\n\n")
	b.WriteString("<!-- Generated from internal/lint/catalogue.go by `go test ./internal/lint -run TestRuleCatalogueDoc -update`. Do not edit by hand. -->\n\n")
	b.WriteString("Every rule has a stable ID (IDs are never reused), a default severity and the reason it exists, citing the seed document section it comes from. ")
	b.WriteString("The seeds are the project's three specification documents (`shared/seeds/`); section names are quoted as the seeds title them, and their YAML is kept verbatim in `examples/seeds/`:\n\n")
	b.WriteString("- **" + seedMultus + "** (`000_98b5c004c2ecafb6.txt`) — 云原生Kubernetes训练集群Multus、SR-IOV与RDMA技术方案\n")
	b.WriteString("- **" + seedRoutes + "** (`002_03ce36b694172c8f.txt`) — 容器里的 RDMA：从内核旁路到 hostNetwork 与 SR-IOV\n")
	b.WriteString("- **" + seedMacvlan + "** (`003_18ee8f8a85892c1d.txt`) — Macvlan 在大模型训练中的角色:为 Pod 提供共享 RDMA 通道\n\n")
	b.WriteString("Severities: `error` fails `kubectl rdma lint` (exit 1): the pod is rejected, never becomes ready, or silently runs without RDMA. ")
	b.WriteString("`warning` is a configuration that works in some clusters and breaks in others. `info` is advice.\n\n")
	b.WriteString("Suppress a rule for one object with the annotation `" + DisableAnnotation + ": \"RDMA070,RDMA051\"` on the object or its pod template. ")
	b.WriteString("`" + NodeExclusiveAnnotation + ": \"true\"` on a pod template declares whole-node placement (RDMA051 becomes info).\n\n")
	b.WriteString("At admission (rdmanet-controller's validating webhook, [docs/webhook.md](webhook.md#what-is-refused-and-where)) the rules fall in two classes. ")
	b.WriteString("An error of " + strings.Join(CannotStartRules(), ", ") + " means the pod, as created, can never start; such a pod is refused for everyone, opted in or not. ")
	b.WriteString("Every other error is about risk and refuses a pod only where it is enforced (the pod opts in, or its namespace is labelled `rdmanet.io/enforce=true`); elsewhere it comes back as an admission warning.\n\n")
	b.WriteString("| ID | name | severity | summary |\n|---|---|---|---|\n")
	ids := make([]string, 0, len(Catalogue))
	for _, r := range Catalogue {
		ids = append(ids, r.ID)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r := ruleByID[id]
		fmt.Fprintf(&b, "| [%s](#%s) | %s | %s | %s |\n", r.ID, strings.ToLower(r.ID), r.Name, r.Severity, r.Summary)
	}
	b.WriteString("\n")
	for _, id := range ids {
		r := ruleByID[id]
		fmt.Fprintf(&b, "## %s\n\n**%s** — severity `%s`\n\n%s\n\n**Why.** %s\n\n**Fix.** %s\n\n", r.ID, r.Name, r.Severity, r.Summary, r.Why, r.Fix)
		if why := CannotStartReason(r.ID); why != "" {
			fmt.Fprintf(&b, "**Admission.** Refused for every pod, opted in or not: %s.\n\n", why)
		}
	}
	return b.String()
}
