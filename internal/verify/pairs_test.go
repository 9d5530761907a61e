package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/rdmanet/rdmanet/internal/pairprobe"
	"github.com/rdmanet/rdmanet/internal/textout"
	vt "github.com/rdmanet/rdmanet/internal/verify/verifytest"
)

const trainNet = vt.NS + "/face-training-rdma"

func podsOf(ps ...*corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range ps {
		out = append(out, *p)
	}
	return out
}

func TestPairMembers(t *testing.T) {
	pending := vt.TrainingPod("p-1", "n2", trainNet, "10.60.2.1")
	pending.Status.Phase = corev1.PodPending
	done := vt.TrainingPod("p-9", "n2", trainNet, "10.60.2.9")
	done.Status.Phase = corev1.PodSucceeded
	noStatus := vt.TrainingPod("p-1", "n2", trainNet, "10.60.2.1")
	delete(noStatus.Annotations, NetworkStatusAnnotation)
	onlyDefault := vt.TrainingPod("p-1", "n2", trainNet, "10.60.2.1",
		vt.WithAnn(NetworkStatusAnnotation, `[{"name":"k8s-pod-network","interface":"eth0","ips":["10.244.0.9"],"default":true}]`))
	dual := vt.TrainingPod("p-1", "n2", trainNet, "",
		vt.WithAnn(NetworkStatusAnnotation, `[{"name":"ai-training/face-training-rdma","interface":"net1","ips":["fd00::5","10.60.2.5"],"mtu":9000}]`))
	tests := []struct {
		name        string
		pods        []corev1.Pod
		wantMembers string // pod@node:net1=ip,...
		wantSkipped int
		wantErr     string
	}{
		{name: "two running pods, sorted", pods: podsOf(vt.TrainingPod("p-1", "n2", trainNet, "10.60.2.1"), vt.TrainingPod("p-0", "n1", trainNet, "10.60.1.1")),
			wantMembers: "0 p-0@n1:net1=10.60.1.1 1 p-1@n2:net1=10.60.2.1"},
		{name: "ended pods are skipped", pods: podsOf(vt.TrainingPod("p-0", "n1", trainNet, "10.60.1.1"), done),
			wantMembers: "0 p-0@n1:net1=10.60.1.1", wantSkipped: 1},
		{name: "IPv4 preferred, network-status mtu kept", pods: podsOf(dual), wantMembers: "0 p-1@n2:net1=10.60.2.5"},
		{name: "pending pod: exit-2 error naming it and the fix", pods: podsOf(pending),
			wantErr: "pod ai-training/p-1 is Pending, not Running: the probe runs in running pods; fix: wait for the workload (kubectl wait --for=condition=Ready pod/p-1 -n ai-training)"},
		{name: "no network-status", pods: podsOf(noStatus), wantErr: "pod ai-training/p-1: no annotation k8s.v1.cni.cncf.io/network-status"},
		{name: "only the default network", pods: podsOf(onlyDefault), wantErr: "has no secondary network with an address (only the default network)"},
		{name: "hostNetwork pod", pods: podsOf(vt.HostPod()), wantErr: "spec.hostNetwork is true"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ms, sk, err := PairMembers(tc.pods)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range ms {
				s := fmt.Sprintf("%d %s@%s:", m.Index, m.Pod, m.Node)
				for _, a := range m.Attachments {
					s += a.Interface + "=" + a.IP
				}
				got = append(got, s)
			}
			if strings.Join(got, " ") != tc.wantMembers || len(sk) != tc.wantSkipped {
				t.Errorf("members %q skipped %q, want %q and %d skipped", got, sk, tc.wantMembers, tc.wantSkipped)
			}
		})
	}
}

func TestPlanFromNAD(t *testing.T) {
	nad := func(cfg string) *NAD {
		raw, _ := json.Marshal(map[string]any{"spec": map[string]any{"config": cfg}})
		return &NAD{Raw: raw}
	}
	members := []Member{{Pod: "a", Attachments: []Attachment{{Network: "ns/x", StatusMTU: 4000}}}}
	tests := []struct {
		name        string
		nad         *NAD
		wantMTU     int
		wantSource  string
		wantSubnets string
	}{
		{name: "whereabouts range and sriov mtu", nad: nad(`{"cniVersion":"0.3.1","plugins":[{"type":"sriov","mtu":9000,"ipam":{"type":"whereabouts","range":"10.60.0.0/16"}},{"type":"rdma"}]}`),
			wantMTU: 9000, wantSource: "nad", wantSubnets: "10.60.0.0/16"},
		{name: "whereabouts start-end range and ipRanges", nad: nad(`{"type":"macvlan","mtu":9000,"ipam":{"type":"whereabouts","range":"192.168.2.225-192.168.2.230/24","ipRanges":[{"range":"10.1.0.0/24"}]}}`),
			wantMTU: 9000, wantSource: "nad", wantSubnets: "192.168.2.0/24,10.1.0.0/24"},
		{name: "host-local ranges, no mtu: network-status'", nad: nad(`{"type":"macvlan","ipam":{"type":"host-local","ranges":[[{"subnet":"10.2.0.0/24"}],[{"subnet":"10.3.0.0/24"}]]}}`),
			wantMTU: 4000, wantSource: "network-status", wantSubnets: "10.2.0.0/24,10.3.0.0/24"},
		{name: "NAD gone: status mtu, no subnets", nad: nil, wantMTU: 4000, wantSource: "network-status", wantSubnets: ""},
		{name: "static addresses", nad: nad(`{"type":"macvlan","ipam":{"type":"static","addresses":[{"address":"10.9.0.5/24"}]}}`),
			wantMTU: 4000, wantSource: "network-status", wantSubnets: "10.9.0.0/24"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := PlanFromNAD("ns/x", tc.nad, "", members)
			if p.MTU != tc.wantMTU || p.MTUSource != tc.wantSource || strings.Join(p.Subnets, ",") != tc.wantSubnets {
				t.Errorf("plan %+v, want MTU %d (%s) subnets %q", p, tc.wantMTU, tc.wantSource, tc.wantSubnets)
			}
		})
	}
	if p := PlanFromNAD("ns/x", nil, "", nil); p.MTU != 0 || p.MTUSource != "interface" {
		t.Errorf("no NAD, no status mtu: %+v, want the interface's", p)
	}
}

func TestPlacementRule(t *testing.T) {
	pod := func(name, node string, opts ...vt.PodOpt) *corev1.Pod {
		return vt.TrainingPod(name, node, trainNet, "10.60.0.1", opts...)
	}
	tests := []struct {
		name     string
		a, b     *corev1.Pod
		spread   map[string]int
		eligible int
		want     string // substring; "" = no rule
	}{
		{name: "no rule", a: pod("a", "n1"), b: pod("b", "n1")},
		{name: "required anti-affinity over hostname selecting the peer", a: pod("a", "n1", vt.AntiAffinity("face-trainer")), b: pod("b", "n1"),
			want: "pod a: spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0] (topologyKey kubernetes.io/hostname, labelSelector app=face-trainer) selects pod b"},
		{name: "the peer's anti-affinity counts too", a: pod("a", "n1"), b: pod("b", "n1", vt.AntiAffinity("face-trainer")), want: "pod b: spec.affinity"},
		{name: "anti-affinity not selecting the peer", a: pod("a", "n1", vt.AntiAffinity("other")), b: pod("b", "n1")},
		{name: "anti-affinity over a zone key is not about nodes", a: pod("a", "n1", func(p *corev1.Pod) {
			vt.AntiAffinity("face-trainer")(p)
			p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey = "topology.kubernetes.io/zone"
		}), b: pod("b", "n1")},
		{name: "preferred anti-affinity does not ask", a: pod("a", "n1", func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 1,
				PodAffinityTerm: corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "face-trainer"}}, TopologyKey: HostnameKey}}}}}
		}), b: pod("b", "n1")},
		{name: "spread DoNotSchedule, skew broken (2 on n1, an eligible node empty)", a: pod("a", "n1", vt.Spread("face-trainer", 1)), b: pod("b", "n1"),
			spread: map[string]int{"n1": 2}, eligible: 2, want: "spec.topologySpreadConstraints[0] (topologyKey kubernetes.io/hostname, maxSkew 1, DoNotSchedule) selects pod b, and node n1 holds 2 of the pods against 0"},
		{name: "spread DoNotSchedule, more pods than nodes: skew kept", a: pod("a", "n1", vt.Spread("face-trainer", 1)), b: pod("b", "n1"),
			spread: map[string]int{"n1": 2, "n2": 1}, eligible: 2},
		{name: "spread ScheduleAnyway does not ask", a: pod("a", "n1", vt.Spread("face-trainer", 1), func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints[0].WhenUnsatisfiable = corev1.ScheduleAnyway
		}), b: pod("b", "n1"), spread: map[string]int{"n1": 2}, eligible: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := PlacementRule(tc.a, tc.b, tc.spread, tc.eligible)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("rule = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestAssemblePairs(t *testing.T) {
	members := []Member{
		{Index: 0, Pod: "a", Node: "n1", Attachments: []Attachment{{Network: trainNet, Interface: "net1", IP: "10.60.1.1"}}},
		{Index: 1, Pod: "b", Node: "n2", Attachments: []Attachment{{Network: trainNet, Interface: "net1", IP: "10.60.2.1"}}},
	}
	plans := map[string]NetPlan{trainNet: {Network: trainNet, MTU: 9000, MTUSource: "nad", Subnets: []string{"10.60.0.0/16"}}}
	good := func(from, to Member) pairprobe.Result {
		return vt.GoodResult(pairprobe.Target{Peer: to.Pod, Network: trainNet, Interface: "net1", Src: from.Attachments[0].IP, Dst: to.Attachments[0].IP, MTU: 9000})
	}
	outcomes := func(ab, ba func(pairprobe.Result) pairprobe.Result) map[string]ProbeOutcome {
		return map[string]ProbeOutcome{
			"a": {Results: map[string]map[string]pairprobe.Result{"b": {trainNet: ab(good(members[0], members[1]))}}},
			"b": {Results: map[string]map[string]pairprobe.Result{"a": {trainNet: ba(good(members[1], members[0]))}}},
		}
	}
	id := func(r pairprobe.Result) pairprobe.Result { return r }
	tests := []struct {
		name     string
		members  func([]Member) []Member
		plans    map[string]NetPlan
		out      map[string]ProbeOutcome
		pods     func(a, b *corev1.Pod)
		want     string // a→b status, b→a status
		wantEv   string // substring of a→b's evidence
		wantFail string // a→b's failed layers
	}{
		{name: "all ok across nodes", out: outcomes(id, id), want: "ok ok", wantEv: "10.60.1.1 → 10.60.2.1 reachable, RTT 50µs, DF 8972 bytes (MTU 9000) echoed"},
		{name: "unreachable one way", out: outcomes(func(r pairprobe.Result) pairprobe.Result {
			r.Reachable, r.MaxDF, r.Error = false, 0, "10.60.1.1 → 10.60.2.1: no echo within 5s"
			return r
		}, id), want: "unreachable ok", wantEv: "no echo within 5s", wantFail: "unreachable"},
		{name: "mtu: jumbo lost", out: outcomes(id, func(r pairprobe.Result) pairprobe.Result {
			r.MaxDF, r.Error = 1472, "DF payload 8972 bytes (IP packet 9000) lost on the path; largest echoed 1472 bytes (IP packet 1500)"
			return r
		}), want: "ok mtu"},
		{name: "subnet: an address outside the NAD's range wins over unreachable", members: func(ms []Member) []Member {
			ms[1].Attachments[0].IP = "10.61.0.5"
			return ms
		}, out: outcomes(func(r pairprobe.Result) pairprobe.Result { r.Reachable = false; r.Error = "no echo"; return r }, id),
			want: "subnet subnet", wantEv: "peer address 10.61.0.5 is outside NAD ai-training/face-training-rdma's IPAM subnets 10.60.0.0/16", wantFail: "subnet,unreachable"},
		{name: "subnet without a NAD plan: the client interface's prefix", members: func(ms []Member) []Member {
			ms[1].Attachments[0].IP = "10.61.0.5"
			return ms
		}, plans: map[string]NetPlan{trainNet: {Network: trainNet, MTU: 9000}}, out: outcomes(id, id),
			want: "subnet ok", wantEv: "peer address 10.61.0.5 is outside net1's 10.60.1.1/16"},
		{name: "no network in common", members: func(ms []Member) []Member {
			ms[1].Attachments[0].Network = vt.NS + "/other"
			return ms
		}, out: map[string]ProbeOutcome{}, want: "subnet subnet", wantEv: "no training network in common: a has ai-training/face-training-rdma, b has ai-training/other"},
		{name: "same node with anti-affinity", members: func(ms []Member) []Member {
			ms[1].Node = "n1"
			return ms
		}, pods: func(a, b *corev1.Pod) { vt.AntiAffinity("face-trainer")(a) }, out: outcomes(id, id),
			want: "same-node same-node", wantEv: "both on node n1, but pod a: spec.affinity.podAntiAffinity"},
		{name: "same node without a rule: ok, noted", members: func(ms []Member) []Member {
			ms[1].Node = "n1"
			return ms
		}, out: outcomes(id, id), want: "ok ok", wantEv: "same node n1: this pair's traffic did not cross nodes"},
		{name: "client failed: unknown", out: map[string]ProbeOutcome{"a": {Err: "container rdma-probe-c-x exited 2"}, "b": outcomes(id, id)["b"]},
			want: "unknown ok", wantEv: "pod a: probe client: container rdma-probe-c-x exited 2"},
		{name: "responder failed: unknown towards it", out: map[string]ProbeOutcome{"a": {ResponderErr: "bind: address already in use"}, "b": {Results: map[string]map[string]pairprobe.Result{}}, "x": {}},
			want: "unknown unknown"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ms := make([]Member, len(members))
			for i, m := range members {
				m.Attachments = append([]Attachment(nil), m.Attachments...)
				ms[i] = m
			}
			if tc.members != nil {
				ms = tc.members(ms)
			}
			pl := plans
			if tc.plans != nil {
				pl = tc.plans
			}
			pa, pb := vt.TrainingPod("a", ms[0].Node, trainNet, ms[0].Attachments[0].IP), vt.TrainingPod("b", ms[1].Node, trainNet, ms[1].Attachments[0].IP)
			if tc.pods != nil {
				tc.pods(pa, pb)
			}
			cells, _ := AssemblePairs(ms, pl, map[string]*corev1.Pod{"a": pa, "b": pb}, nil, 0, tc.out)
			if len(cells) != 2 {
				t.Fatalf("%d cells, want 2", len(cells))
			}
			if got := cells[0].Status + " " + cells[1].Status; got != tc.want {
				t.Errorf("statuses %q, want %q (evidence %q / %q)", got, tc.want, cells[0].Evidence, cells[1].Evidence)
			}
			if !strings.Contains(cells[0].Evidence, tc.wantEv) {
				t.Errorf("a→b evidence %q, want %q", cells[0].Evidence, tc.wantEv)
			}
			if tc.wantFail != "" && strings.Join(cells[0].Failed, ",") != tc.wantFail {
				t.Errorf("a→b failed layers %v, want %s", cells[0].Failed, tc.wantFail)
			}
			if cells[0].Status != PairOK && cells[0].Status != PairUnknown && cells[0].Fix == "" {
				t.Errorf("a→b %s has no fix", cells[0].Status)
			}
		})
	}
}

// pairWorld is a fake cluster with a workload's pods, the NAD and the
// rdmanet-node DaemonSet, and a fake kubelet running the probes.
type pairWorld struct {
	cs  *fake.Clientset
	dc  *dynamicfake.FakeDynamicClient
	kub *vt.FakeKubelet
}

func newPairWorld(t testing.TB, n int, kub *vt.FakeKubelet, opts ...vt.PodOpt) (*pairWorld, []corev1.Pod) {
	objs := []runtime.Object{vt.RdmanetNodeDaemonSet("rdmanet/rdmanet:0.2.0")}
	var pods []corev1.Pod
	for i := range n {
		p := vt.TrainingPod(fmt.Sprintf("face-trainer-%d", i), fmt.Sprintf("node-%d", i%max(1, n/2)), trainNet, fmt.Sprintf("10.60.%d.%d", i/200+1, i%200+2), opts...)
		objs = append(objs, p)
		pods = append(pods, *p)
	}
	cs := fake.NewClientset(objs...)
	kub.Attach(cs)
	dc := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{NADGVR: "NetworkAttachmentDefinitionList"})
	nad := vt.NADObject("face-training-rdma", "example.com/sriov_rdma", `{"cniVersion":"0.3.1","plugins":[{"type":"sriov","mtu":9000,"ipam":{"type":"whereabouts","range":"10.60.0.0/16"}},{"type":"rdma"}]}`)
	if _, err := dc.Resource(NADGVR).Namespace(vt.NS).Create(context.Background(), &unstructured.Unstructured{Object: nad}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return &pairWorld{cs: cs, dc: dc, kub: kub}, pods
}

func (w *pairWorld) runner(progress io.Writer) *PairRunner {
	return &PairRunner{G: &Gatherer{Client: w.cs, Dynamic: w.dc, Logs: w.kub}, Progress: progress, Poll: 5 * time.Millisecond, RunID: "t1"}
}

func TestPairRunner(t *testing.T) {
	tests := []struct {
		name      string
		n         int
		kub       *vt.FakeKubelet
		image     string
		noDS      bool
		want      string // summary result
		wantCells int
		wantErr   string
		check     func(t *testing.T, r *PairReport, kub *vt.FakeKubelet)
	}{
		{name: "four pods on two nodes, all ok", n: 4, kub: &vt.FakeKubelet{}, want: "ok", wantCells: 12,
			check: func(t *testing.T, r *PairReport, kub *vt.FakeKubelet) {
				if r.ProbeImage != "rdmanet/rdmanet:0.2.0" || kub.Added != 8 {
					t.Errorf("image %q, %d containers added; want the DaemonSet's image and 2 per pod", r.ProbeImage, kub.Added)
				}
				plan := kub.Plans["face-trainer-0"]
				if len(plan.Targets) != 3 || plan.Targets[0].MTU != 9000 || plan.Targets[0].Interface != "net1" || plan.Targets[0].Src != "10.60.1.2" || plan.Targets[0].Dst != "10.60.1.3" {
					t.Errorf("plan of face-trainer-0 = %+v", plan.Targets)
				}
				if r.Summary.CrossNode != 8 || r.Networks[0].Subnets[0] != "10.60.0.0/16" {
					t.Errorf("cross-node %d (want 8), networks %+v", r.Summary.CrossNode, r.Networks)
				}
			}},
		{name: "--probe-image overrides, no DaemonSet needed", n: 2, kub: &vt.FakeKubelet{}, image: "example/probe:1", noDS: true, want: "ok", wantCells: 2,
			check: func(t *testing.T, r *PairReport, _ *vt.FakeKubelet) {
				if r.ProbeImage != "example/probe:1" {
					t.Errorf("image %q", r.ProbeImage)
				}
			}},
		{name: "no DaemonSet and no --probe-image: exit-2 error with the fix", n: 2, kub: &vt.FakeKubelet{}, noDS: true,
			wantErr: "the probe image defaults to daemonset rdmanet-system/rdmanet-node's: daemonsets.apps \"rdmanet-node\" not found; fix: pass --probe-image"},
		{name: "image cannot be pulled", n: 2, kub: &vt.FakeKubelet{Fail: map[string]string{"face-trainer-1": "ImagePullBackOff"}},
			wantErr: "ephemeral container rdma-probe-s-t1 in pod ai-training/face-trainer-1 (node node-0) cannot start: ImagePullBackOff"},
		{name: "one pod: too few", n: 1, kub: &vt.FakeKubelet{}, wantErr: "has 1 running pod(s) with a training network: a pair needs two"},
		{name: "a responder could not bind: cells towards it unknown", n: 3, kub: &vt.FakeKubelet{ServeExit: map[string]string{"face-trainer-2": "listen: address already in use"},
			Net: func(from string, tg pairprobe.Target) pairprobe.Result {
				r := vt.GoodResult(tg)
				if tg.Peer == "face-trainer-2" {
					r = pairprobe.Result{Target: tg, Error: "port unreachable"}
				}
				return r
			}}, want: "problem", wantCells: 6,
			check: func(t *testing.T, r *PairReport, _ *vt.FakeKubelet) {
				if c := r.FirstProblem(); c == nil || c.To != "face-trainer-2" || c.Status != PairUnreachable {
					t.Errorf("first problem %+v", c)
				}
			}},
		{name: "mtu broken on one node", n: 4, kub: &vt.FakeKubelet{Net: func(from string, tg pairprobe.Target) pairprobe.Result {
			r := vt.GoodResult(tg)
			if tg.Peer == "face-trainer-1" || from == "face-trainer-1" {
				r.MaxDF, r.Error = 1472, "DF payload 8972 bytes lost"
			}
			return r
		}}, want: "problem", wantCells: 12,
			check: func(t *testing.T, r *PairReport, _ *vt.FakeKubelet) {
				if r.Summary.Problem != 6 || r.FirstProblem().From != "face-trainer-0" || r.FirstProblem().To != "face-trainer-1" {
					t.Errorf("summary %+v first %+v", r.Summary, r.FirstProblem())
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, pods := newPairWorld(t, tc.n, tc.kub)
			if tc.noDS {
				_ = w.cs.AppsV1().DaemonSets("rdmanet-system").Delete(context.Background(), "rdmanet-node", metav1.DeleteOptions{})
			}
			var prog bytes.Buffer
			r := w.runner(&prog)
			r.ProbeImage = tc.image
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			rep, err := r.Run(ctx, vt.NS, Target{Kind: "job", Name: "face-trainer"}, pods)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rep.Summary.Result != tc.want || len(rep.Cells) != tc.wantCells {
				t.Errorf("result %s with %d cells, want %s with %d (cells %+v)", rep.Summary.Result, len(rep.Cells), tc.want, tc.wantCells, rep.Cells)
			}
			if !strings.Contains(prog.String(), "verify: starting probe responders (ephemeral container rdma-probe-s-t1)") {
				t.Errorf("progress lacks the responders line:\n%s", prog.String())
			}
			if tc.check != nil {
				tc.check(t, rep, tc.kub)
			}
		})
	}
}

func TestPairRendering(t *testing.T) {
	kub := &vt.FakeKubelet{Net: func(from string, tg pairprobe.Target) pairprobe.Result {
		r := vt.GoodResult(tg)
		if from == "face-trainer-0" && tg.Peer == "face-trainer-2" {
			r.MaxDF, r.Error = 1472, "DF payload 8972 bytes (IP packet 9000) lost on the path; largest echoed 1472 bytes (IP packet 1500)"
		}
		return r
	}}
	w, pods := newPairWorld(t, 3, kub)
	rep, err := w.runner(nil).Run(context.Background(), vt.NS, Target{Kind: "job", Name: "face-trainer"}, pods)
	if err != nil {
		t.Fatal(err)
	}
	rep.DurationMS = 1200
	res := NewResult(nil)
	res.SetPairs(rep)
	var txt bytes.Buffer
	if err := res.WriteText(&txt, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"kubectl rdma verify pairs job/face-trainer in ai-training  3 pods on 1 nodes  probe image rdmanet/rdmanet:0.2.0",
		"  network ai-training/face-training-rdma  MTU 9000 (nad)  subnets 10.60.0.0/16",
		"  0   face-trainer-0  node-0  net1 10.60.1.2",
		"  from\\to    0    1    2\n  0          -   ok  mtu\n  1         ok    -   ok\n  2         ok   ok    -\n",
		"  face-trainer-0 → face-trainer-2  (node-0 → node-0)  MTU  ai-training/face-training-rdma: DF payload 8972 bytes (IP packet 9000) lost on the path",
		"      fix: raise the MTU on every hop",
		"PROBLEM pairs: 6 cells, 5 ok, 1 problem, 0 unknown; 0 cross-node; max RTT 50µs; 1.2s",
	} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, txt.String())
		}
	}
	var js bytes.Buffer
	if err := res.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Pods  []any `json:"pods"`
		Pairs struct {
			Target  string `json:"target"`
			Members []struct {
				Index       int    `json:"index"`
				Pod         string `json:"pod"`
				Node        string `json:"node"`
				Attachments []struct {
					Network, Interface, IP string
				} `json:"attachments"`
			} `json:"members"`
			Networks []struct {
				MTU       int    `json:"mtu"`
				MTUSource string `json:"mtu_source"`
			} `json:"networks"`
			Cells []struct {
				From, To, Status string
				Failed           []string `json:"failed_layers"`
				CrossNode        bool     `json:"cross_node"`
				Networks         []struct {
					MaxDF  int `json:"max_df_bytes"`
					WantDF int `json:"want_df_bytes"`
					RTT    int `json:"rtt_us"`
				} `json:"networks"`
			} `json:"cells"`
			Summary PairSummary `json:"summary"`
		} `json:"pairs"`
		Summary Summary `json:"summary"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	p := back.Pairs
	if back.Summary.Result != "problem" || p.Target != "job/face-trainer" || len(p.Members) != 3 || p.Members[2].Attachments[0].IP != "10.60.1.4" ||
		p.Networks[0].MTU != 9000 || len(p.Cells) != 6 || p.Cells[1].Status != "mtu" || p.Cells[1].Failed[0] != "mtu" ||
		p.Cells[1].Networks[0].MaxDF != 1472 || p.Cells[1].Networks[0].WantDF != 8972 || p.Summary.Problem != 1 || back.Pods == nil {
		t.Errorf("JSON round trip: %+v\n%s", back, js.String())
	}
}

// TestPairRun16 times the CLI's side of a 16-pod pair run over the fake
// cluster (API calls, polling, log parsing, assembly), with the kubelet's
// container start set to 0 and to 300ms per phase: what is left of a real
// run is the kubelet's start latency and the probes themselves (measured in
// internal/pairprobe's netns tests).
func TestPairRun16(t *testing.T) {
	for _, start := range []time.Duration{0, 300 * time.Millisecond} {
		t.Run(fmt.Sprintf("kubelet start %s", start), func(t *testing.T) {
			w, pods := newPairWorld(t, 16, &vt.FakeKubelet{Start: start})
			r := w.runner(nil)
			r.Poll = 250 * time.Millisecond // the CLI's default
			t0 := time.Now()
			rep, err := r.Run(context.Background(), vt.NS, Target{Kind: "job", Name: "face-trainer"}, pods)
			if err != nil {
				t.Fatal(err)
			}
			took := time.Since(t0)
			if rep.Summary.Cells != 240 || rep.Summary.OK != 240 || rep.Summary.Nodes != 8 {
				t.Fatalf("summary %+v", rep.Summary)
			}
			t.Logf("16 pods, 8 nodes, 240 cells: %s (kubelet start %s per phase)", took.Round(time.Millisecond), start)
			var txt bytes.Buffer
			p := &textout.Printer{W: &txt}
			writePairs(p, rep)
			if testing.Verbose() {
				t.Logf("\n%s", txt.String())
			}
		})
	}
}

func TestNaturalLess(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		want bool
	}{
		{name: "index order", a: "trainer-2", b: "trainer-10", want: true},
		{name: "reverse", a: "trainer-10", b: "trainer-2", want: false},
		{name: "letters", a: "a-1", b: "b-0", want: true},
		{name: "prefix shorter first", a: "job", b: "job-0", want: true},
		{name: "equal", a: "x-1", b: "x-1", want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := naturalLess(tc.a, tc.b); got != tc.want {
				t.Errorf("naturalLess(%q, %q) = %v", tc.a, tc.b, got)
			}
		})
	}
}
