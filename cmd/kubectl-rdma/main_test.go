package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

func runCmd(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

const seeds = "../../examples/seeds"

func TestLintExitCodes(t *testing.T) {
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken.yaml")
	if err := os.WriteFile(broken, []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  labels: [x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		stdin  string
		code   int
		stdout string
		stderr string
	}{
		{name: "seed exclusive Job lacks IPC_LOCK", args: []string{"lint", seeds + "/exclusive"}, code: 1, stdout: "RDMA060"},
		{name: "seed hostNetwork pod has warnings only", args: []string{"lint", seeds + "/hostnetwork"}, code: 0, stdout: "mode host"},
		{name: "unparseable file names file and line", args: []string{"lint", broken}, code: 2, stderr: "broken.yaml:5"},
		{name: "missing file", args: []string{"lint", filepath.Join(dir, "nope.yaml")}, code: 2, stderr: "nope.yaml"},
		{name: "no paths", args: []string{"lint"}, code: 2, stderr: "at least one"},
		{name: "bad output format", args: []string{"lint", "-o", "xml", seeds}, code: 2, stderr: "want text or json"},
		{name: "stdin", args: []string{"lint", "-"}, stdin: "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  hostNetwork: true\n  containers: [{name: c, securityContext: {capabilities: {add: [IPC_LOCK]}}}]\n", code: 1, stdout: "RDMA050"},
		{name: "warnings fail with --fail-on warning", args: []string{"lint", "--fail-on", "warning", seeds + "/hostnetwork"}, code: 1, stdout: "RDMA070"},
		{name: "bad --fail-on", args: []string{"lint", "--fail-on", "fatal", seeds}, code: 2, stderr: "--fail-on"},
		{name: "rule list", args: []string{"lint", "--rules"}, code: 0, stdout: "RDMA045"},
		{name: "unknown flag", args: []string{"lint", "--bogus"}, code: 2, stderr: "unknown flag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCmd(t, tc.stdin, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out, errs)
			}
			if !strings.Contains(out, tc.stdout) || !strings.Contains(errs, tc.stderr) {
				t.Errorf("stdout %q / stderr %q lack %q / %q", out, errs, tc.stdout, tc.stderr)
			}
			if strings.Contains(out, "\x1b[") {
				t.Error("colour escapes written to a non-terminal")
			}
		})
	}
}

func TestLintJSONExactShape(t *testing.T) {
	code, out, _ := runCmd(t, "", "lint", "-o", "json", seeds)
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &top); err != nil {
		t.Fatal(err)
	}
	if got := keysOf(top); got != "findings,workloads" {
		t.Fatalf("top-level keys %s", got)
	}
	var ws []map[string]json.RawMessage
	var fs []map[string]json.RawMessage
	_ = json.Unmarshal(top["workloads"], &ws)
	_ = json.Unmarshal(top["findings"], &fs)
	if len(ws) < 4 || len(fs) == 0 {
		t.Fatalf("%d workloads, %d findings", len(ws), len(fs))
	}
	for _, w := range ws {
		if got := keysOf(w); got != "evidence,kind,mode,name,namespace" {
			t.Errorf("workload keys %s", got)
		}
	}
	for _, f := range fs {
		if got := keysOf(f); got != "field,fix,message,object,rule,severity" {
			t.Errorf("finding keys %s", got)
		}
	}
}

func keysOf[V any](m map[string]V) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

func TestNCCL(t *testing.T) {
	td := "../../internal/nccl/testdata/"
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string
	}{
		{name: "IB with GDR", args: []string{"nccl", td + "ib_gdr.log"}, code: 0, stdout: "GPUDirect RDMA yes"},
		{name: "silent fallback", args: []string{"nccl", td + "socket_fallback.log"}, code: 1, stdout: "SOCKET_FALLBACK"},
		{name: "mixed", args: []string{"nccl", "-o", "json", td + "mixed_ranks.log"}, code: 1, stdout: `"transport": "mixed"`},
		{name: "baseline", args: []string{"nccl", td + "ib_gdr.log", "--baseline", td + "socket_baseline.log"}, code: 0, stdout: "speedup"},
		{name: "IB disabled or failed is a warning", args: []string{"nccl", td + "v2_28_ib_disabled_no_env.log"}, code: 0, stdout: "IB_DISABLED_OR_FAILED"},
		{name: "no bootstrap interface behind timestamps", args: []string{"nccl", td + "v2_28_ts_warn_no_ifname.log"}, code: 1, stdout: "NO_OOB_INTERFACE"},
		{name: "network plugin by name", args: []string{"nccl", "-o", "json", td + "hpcx_ibext_v8.log"}, code: 0, stdout: `"transport": "IBext_v8"`},
		{name: "completion error", args: []string{"nccl", td + "status12_v2_28_ts.log"}, code: 1, stdout: "IB_RETRY_EXCEEDED"},
		{name: "no NCCL lines", args: []string{"nccl", td + "no_nccl_lines.log"}, code: 0, stdout: "NO_NCCL_LINES"},
		{name: "missing log", args: []string{"nccl", td + "nope.log"}, code: 2},
		{name: "no args", args: []string{"nccl"}, code: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCmd(t, "", tc.args...)
			if code != tc.code || !strings.Contains(out, tc.stdout) {
				t.Errorf("exit %d (want %d), stdout lacks %q:\n%s\n%s", code, tc.code, tc.stdout, out, errs)
			}
		})
	}
	code, out, _ := runCmd(t, "", "nccl", "-o", "json", td+"ib_gdr.log")
	var m map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &m) != nil {
		t.Fatalf("exit %d, output %s", code, out)
	}
	for _, k := range []string{"transport", "gdr", "gdr_verdict", "ranks", "env", "busbw_avg_gbps"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
}

func TestRenderThenLint(t *testing.T) {
	for _, name := range []string{"exclusive", "shared", "host", "exclusive --dra", "shared --dra",
		"exclusive --link-type infiniband --pkey 0x8005", "shared --link-type infiniband --pkey 0x8006", "host --link-type infiniband"} {
		t.Run(name, func(t *testing.T) {
			f := strings.Fields(name)
			mode, extra := f[0], f[1:]
			pf, ib := "enp65s0f0np0", strings.Contains(name, "infiniband")
			if ib {
				pf = "ibp193s0f1"
			}
			args := []string{"render", "--mode", mode, "--name", "face-trainer", "-n", "ai-training", "--pf", pf, "--image", "registry.example.com/ai/t:v1"}
			if mode != "host" {
				args = append(args, "--subnet", "10.60.0.0/16")
			}
			args = append(args, extra...)
			code, out, errs := runCmd(t, "", args...)
			if code != 0 {
				t.Fatalf("render exit %d: %s", code, errs)
			}
			if ib && (!strings.Contains(out, `"infiniband"`) || strings.Contains(out, "NCCL_IB_GID_INDEX")) {
				t.Errorf("InfiniBand variant without linkTypes infiniband, or with a GID index:\n%s", out)
			}
			code, lout, _ := runCmd(t, out, "lint", "-o", "json", "-")
			if code != 0 {
				t.Fatalf("lint exit %d:\n%s", code, lout)
			}
			var res struct {
				Workloads []struct{ Mode string }
				Findings  []struct{ Severity, Rule, Message string }
			}
			if err := json.Unmarshal([]byte(lout), &res); err != nil {
				t.Fatal(err)
			}
			if len(res.Workloads) != 1 || res.Workloads[0].Mode != mode {
				t.Errorf("workloads %+v", res.Workloads)
			}
			for _, f := range res.Findings {
				if f.Severity != "info" {
					t.Errorf("%s %s: %s", f.Severity, f.Rule, f.Message)
				}
			}
		})
	}
}

func TestRenderMultiRailFlags(t *testing.T) {
	code, out, errs := runCmd(t, "", "render", "--mode", "shared", "--name", "llm", "--pf", "ens6f0np0", "--pf", "ens6f1np1",
		"--rail-subnet", "192.168.2.0/24", "--rail-subnet", "192.168.3.0/24", "--image", "i:1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	code, lout, _ := runCmd(t, out, "lint", "--fail-on", "warning", "-")
	if code != 0 || !strings.Contains(lout, "llm-rdma-1@net2") {
		t.Errorf("lint exit %d:\n%s", code, lout)
	}
}

func TestRenderSpecFileAndFlags(t *testing.T) {
	spec := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(spec, []byte("mode: exclusive\nname: a\npfNames: [ens1f0np0]\nsubnet: 10.1.0.0/16\nimage: i:1\nnodes: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCmd(t, "", "render", "-f", spec, "--nodes", "4", "--name", "b")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "completions: 4") || !strings.Contains(out, "name: b\n") || !strings.Contains(out, "--nnodes=4") {
		t.Errorf("flags must override the file:\n%s", out)
	}
	code, _, errs = runCmd(t, "", "render", "--mode", "exclusive", "--name", "a", "--pf", "ens1", "--image", "i", "--subnet", "bad")
	if code != 2 || !strings.Contains(errs, "subnet \"bad\"") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
}

func TestSubcommandsRegistered(t *testing.T) {
	root := newRootCmd(streams{in: strings.NewReader(""), out: &bytes.Buffer{}, err: &bytes.Buffer{}})
	seen := map[string]bool{}
	for _, c := range root.Commands() {
		if seen[c.Name()] {
			t.Errorf("subcommand %q registered twice", c.Name())
		}
		seen[c.Name()] = true
		if c.Short == "" {
			t.Errorf("subcommand %q has no help", c.Name())
		}
	}
	for _, want := range []string{"lint", "nccl", "render"} {
		if !seen[want] {
			t.Errorf("subcommand %q missing", want)
		}
	}
	code, out, _ := runCmd(t, "", "--help")
	if code != 0 || !strings.Contains(out, "kubectl rdma") {
		t.Errorf("help: exit %d\n%s", code, out)
	}
}

func TestRenderDRAFlags(t *testing.T) {
	code, out, errs := runCmd(t, "", "render", "--mode", "exclusive", "--dra", "--gpu-device-class", "gpu.example.com", "--name", "llm",
		"--pf", "p0", "--pf", "p1", "--rail-subnet", "10.60.0.0/16", "--rail-subnet", "10.61.0.0/16", "--gpus-per-node", "2", "--image", "i:1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"kind: ResourceClaimTemplate", "deviceClassName: gpu.example.com", "deviceClassName: sriov-rdma-1.rdmanet.io", "resourceClaimTemplateName: llm-devices"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, lout, _ := runCmd(t, out, "lint", "--fail-on", "warning", "-")
	if code != 0 {
		t.Errorf("lint exit %d:\n%s", code, lout)
	}
	code, _, errs = runCmd(t, "", "render", "--mode", "host", "--dra", "--name", "a", "--pf", "ens1", "--image", "i")
	if code != 2 || !strings.Contains(errs, "host mode has no DRA path") {
		t.Errorf("host --dra: exit %d, stderr %q", code, errs)
	}
}
