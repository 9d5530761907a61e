package lint

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/manifest"
)

// draRuleCases are the rule cases of DRA workloads (RDMA090-093, and the
// device-plugin rules made claim-aware).
func draRuleCases() []ruleCase {
	dra := func(mut func(*wlB), tmpl func() M) func() []M {
		return func() []M { return draSet(with(draWL, mut), tmpl()) }
	}
	same := func(*wlB) {}
	tmpl := func(reqs []M, cons []M) func() M { return func() M { return claimTmpl(draTemplate, reqs, cons) } }
	sharedClassObj := func() M { return deviceClassObj("hca-shared.rdma", poolClassCEL("shared", sharedRes)) }
	sharedDRA := func(nad M) func() []M {
		return func() []M {
			w := with(draWL, func(w *wlB) { w.ann = map[string]string{manifest.NetworksAnnotation: "shared-rdma@net1"} })
			return []M{sharedPool(), sharedClassObj(), nad, claimTmpl(draTemplate, []M{dreq("nic", "hca-shared.rdma", 1)}, nil), rdzv(), w.obj()}
		}
	}
	return []ruleCase{
		// RDMA090
		{name: "GPUs and NICs without a pcieRoot constraint", rule: "RDMA090", trigger: true, docs: dra(same, tmpl([]M{dreq("gpus", gpuClass, 8), dreq("nics", vfClass, 8)}, nil))},
		{name: "one constraint over count-8 requests", rule: "RDMA090", trigger: true, docs: dra(same, tmpl([]M{dreq("gpus", gpuClass, 8), dreq("nics", vfClass, 8)}, []M{pcieCon("gpus", "nics")}))},
		{name: "constraint without request names over count-2 requests", rule: "RDMA090", trigger: true, docs: dra(same, tmpl([]M{dreq("gpus", gpuClass, 2), dreq("nics", vfClass, 2)}, []M{{"matchAttribute": "resource.kubernetes.io/pcieRoot"}}))},
		{name: "second pair not constrained", rule: "RDMA090", trigger: true, docs: dra(same, tmpl(
			[]M{dreq("gpu-0", gpuClass, 1), dreq("nic-0", vfClass, 1), dreq("gpu-1", gpuClass, 1), dreq("nic-1", vfClass, 1)}, []M{pcieCon("gpu-0", "nic-0")}))},
		{name: "pairs each constrained", rule: "RDMA090", docs: dra(same, tmpl(
			[]M{dreq("gpu-0", gpuClass, 1), dreq("nic-0", vfClass, 1), dreq("gpu-1", gpuClass, 1), dreq("nic-1", vfClass, 1)}, []M{pcieCon("gpu-0", "nic-0"), pcieCon("gpu-1", "nic-1")}))},
		{name: "one NIC paired, further GPUs unaligned", rule: "RDMA090", docs: dra(same, tmpl(
			[]M{dreq("gpu-0", gpuClass, 1), dreq("nic-0", vfClass, 1), dreq("gpus", gpuClass, 7)}, []M{pcieCon("gpu-0", "nic-0")}))},
		{name: "NIC only", rule: "RDMA090", docs: dra(same, tmpl([]M{dreq("nic", vfClass, 1)}, nil))},
		// RDMA091
		{name: "sriov NAD without resourceName for a claimed VF", rule: "RDMA091", trigger: true, docs: func() []M {
			return []M{vfPool(), vfClassObj(), nadObj(trainNet, ns, "", conflist(trainNet, sriovPlugin(), M{"type": "rdma"})), alignedTmpl(), rdzv(), draWL().obj()}
		}},
		{name: "macvlan NAD without resourceName for a claimed HCA is a warning", rule: "RDMA091", trigger: true, sev: Warning,
			docs: sharedDRA(nadObj("shared-rdma", ns, "", conflist("shared-rdma", macvlanPlugin(sharedPF))))},
		{name: "NAD names the pool", rule: "RDMA091", docs: dra(same, alignedTmpl)},
		{name: "macvlan NAD names the shared pool", rule: "RDMA091", docs: sharedDRA(sharedNAD())},
		// RDMA092
		{name: "NIC class of every exclusive device", rule: "RDMA092", trigger: true, docs: dra(same, tmpl([]M{dreq("nic", "rdma-exclusive.rdmanet.io", 1)}, nil))},
		{name: "NIC class pins another pool", rule: "RDMA092", trigger: true, sev: Error, docs: func() []M {
			other := deviceClassObj("other.example.com", poolClassCEL("exclusive", "example.com/other"))
			return []M{vfPool(), other, exclusiveNAD(), claimTmpl(draTemplate, []M{dreq("nic", "other.example.com", 1)}, nil), rdzv(), draWL().obj()}
		}},
		{name: "request selector pins the pool", rule: "RDMA092", docs: dra(same, func() M {
			r := dreq("nic", "rdma-exclusive.rdmanet.io", 1)
			r["exactly"].(M)["selectors"] = []any{M{"cel": M{"expression": `device.attributes["k8s.cni.cncf.io"].resourceName == "` + vfRes + `"`}}}
			return claimTmpl(draTemplate, []M{r}, nil)
		})},
		{name: "pool class", rule: "RDMA092", docs: dra(same, alignedTmpl)},
		// RDMA093
		{name: "template missing while others are present", rule: "RDMA093", trigger: true, docs: dra(func(w *wlB) {
			w.podClaims = []any{M{"name": "devices", "resourceClaimTemplateName": "train-devcies"}}
		}, alignedTmpl)},
		{name: "no claims in the input", rule: "RDMA093", trigger: true, sev: Info, docs: func() []M { return []M{vfPool(), vfClassObj(), exclusiveNAD(), rdzv(), draWL().obj()} }},
		{name: "ResourceClaim by name", rule: "RDMA093", docs: func() []M {
			c := alignedTmpl()
			c["kind"], c["spec"] = "ResourceClaim", c["spec"].(M)["spec"]
			w := with(draWL, func(w *wlB) { w.podClaims = []any{M{"name": "devices", "resourceClaimName": draTemplate}} })
			return []M{vfPool(), vfClassObj(), exclusiveNAD(), c, rdzv(), w.obj()}
		}},
		{name: "template present", rule: "RDMA093", docs: dra(same, alignedTmpl)},
		// Device-plugin rules on claim workloads.
		{name: "claimed VF needs no device plugin limit", rule: "RDMA014", docs: dra(same, alignedTmpl)},
		{name: "claim only for GPUs, NIC not requested", rule: "RDMA014", trigger: true, docs: dra(same, tmpl([]M{dreq("gpu", gpuClass, 1)}, nil))},
		{name: "claimed VF without networks annotation", rule: "RDMA013", trigger: true, docs: dra(func(w *wlB) { w.ann = nil }, alignedTmpl)},
		{name: "claimed VF container without IPC_LOCK", rule: "RDMA060", trigger: true, docs: dra(func(w *wlB) { w.c().caps = nil }, alignedTmpl)},
		{name: "two attachments, one claimed VF", rule: "RDMA016", trigger: true, docs: dra(func(w *wlB) {
			w.ann[manifest.NetworksAnnotation] = "train-rdma@net1,train-rdma@net2"
		}, alignedTmpl)},
		{name: "two attachments, two claimed VFs", rule: "RDMA016", docs: dra(func(w *wlB) {
			w.ann[manifest.NetworksAnnotation] = "train-rdma@net1,train-rdma@net2"
			w.c().setEnv("NCCL_SOCKET_IFNAME", "=net1,net2")
		}, tmpl([]M{dreq("gpu-0", gpuClass, 1), dreq("nic-0", vfClass, 1), dreq("gpu-1", gpuClass, 1), dreq("nic-1", vfClass, 1)}, []M{pcieCon("gpu-0", "nic-0"), pcieCon("gpu-1", "nic-1")}))},
	}
}

func TestDRABaselineNothingAboveInfo(t *testing.T) {
	res := lintDocs(t, draSet(draWL(), alignedTmpl()))
	if len(res.Workloads) != 1 || res.Workloads[0].Mode != ModeExclusive {
		t.Fatalf("workloads %+v, want one exclusive", res.Workloads)
	}
	for _, f := range res.Findings {
		if f.Severity != Info {
			t.Errorf("%s %s %s: %s", f.Severity, f.Rule, f.Field, f.Message)
		}
	}
}

func TestDRAModeDecision(t *testing.T) {
	sharedTmpl := claimTmpl(draTemplate, []M{dreq("nic", "rdma-shared.rdmanet.io", 1)}, nil)
	for _, tc := range []struct {
		name     string
		docs     []M
		mode     string
		evidence string
	}{
		{name: "pool class in the input", docs: draSet(draWL(), alignedTmpl()), mode: ModeExclusive,
			evidence: "request nic-0: class " + vfClass + " (DeviceClass in the input) selects driver rdma.rdmanet.io, kind exclusive, pool " + vfRes + ": exclusive VF"},
		{name: "well-known exclusive class, no NAD in the input", docs: []M{claimTmpl(draTemplate, []M{dreq("nic", "rdma-exclusive.rdmanet.io", 1)}, nil), draWL().obj()}, mode: ModeExclusive,
			evidence: "class rdma-exclusive.rdmanet.io (well-known class of deploy/dra) selects driver rdma.rdmanet.io, kind exclusive, any pool"},
		{name: "well-known shared class, no NAD", docs: []M{sharedTmpl, with(draWL, func(w *wlB) { w.ann = nil }).obj()}, mode: ModeShared, evidence: "kind shared"},
		{name: "GPU-only claim is TCP", docs: []M{claimTmpl(draTemplate, []M{dreq("gpu", gpuClass, 8)}, nil), with(draWL, func(w *wlB) { w.ann = nil; w.c().env = nil; w.c().caps = nil }).obj()},
			mode: ModeTCP, evidence: "GPU requests gpu (8 devices)"},
		{name: "claim not in the input", docs: []M{vfPool(), exclusiveNAD(), draWL().obj()}, mode: ModeExclusive, evidence: "not in the input: its devices cannot be told"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := lintDocs(t, tc.docs)
			if len(res.Workloads) != 1 {
				t.Fatalf("workloads %+v", res.Workloads)
			}
			w := res.Workloads[0]
			if w.Mode != tc.mode {
				t.Errorf("mode %s, want %s; evidence:\n%s", w.Mode, tc.mode, strings.Join(w.Evidence, "\n"))
			}
			if !strings.Contains(strings.Join(w.Evidence, "\n"), tc.evidence) {
				t.Errorf("evidence lacks %q:\n%s", tc.evidence, strings.Join(w.Evidence, "\n"))
			}
		})
	}
}

// TestDRAGPUsCount: GPUs from a claim count as the pod's GPUs (RDMA078).
func TestDRAGPUsCount(t *testing.T) {
	res := lintDocs(t, []M{claimTmpl(draTemplate, []M{dreq("gpu", gpuClass, 8)}, nil), with(draWL, func(w *wlB) { w.ann = nil; w.c().env = nil; w.c().caps = nil }).obj()})
	found := false
	for _, f := range res.Findings {
		if f.Rule == "RDMA078" && strings.Contains(f.Message, "8 GPUs") {
			found = true
		}
	}
	if !found {
		t.Errorf("want RDMA078 for 8 claimed GPUs on TCP:\n%s", dump(res))
	}
}

// TestDRAExamples: the shipped examples/dra files are aligned the way
// RDMA090 wants.
func TestDRAExamples(t *testing.T) {
	objs, err := manifest.ReadPaths([]string{filepath.Join("..", "..", "examples", "dra")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Lint(objs)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range res.Findings {
		if strings.HasPrefix(f.Rule, "RDMA09") && f.Severity != Info {
			t.Errorf("%s %s %s: %s", f.Severity, f.Rule, f.Object, f.Message)
		}
	}
	if len(res.Workloads) != 2 {
		t.Fatalf("workloads %+v", res.Workloads)
	}
}

// TestLintPodWithClaim: the admission path (one pod, its NADs) does not
// reject a pod whose NIC comes from a claim it cannot see.
func TestLintPodWithClaim(t *testing.T) {
	pod := with(draWL, func(w *wlB) { w.kind = "Pod" }).obj()
	objs, err := manifest.Parse("pod.yaml", []byte(yamlOf(t, []M{pod, exclusiveNAD()})))
	if err != nil {
		t.Fatal(err)
	}
	res, err := LintPod(objs[0], objs[1:])
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range res.Findings {
		if f.Severity == Error {
			t.Errorf("%s %s: %s", f.Severity, f.Rule, f.Message)
		}
	}
	if res.Mode != ModeExclusive {
		t.Errorf("mode %s, want exclusive (from the NAD)", res.Mode)
	}
}
