package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

func ms(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

func TestPercentile(t *testing.T) {
	sixteen := ms(16, 1, 15, 2, 14, 3, 13, 4, 12, 5, 11, 6, 10, 7, 9, 8)
	tests := []struct {
		name    string
		samples []time.Duration
		p       float64
		want    time.Duration
	}{
		{name: "empty", samples: nil, p: 50, want: 0},
		{name: "one sample", samples: ms(7), p: 99, want: 7 * time.Millisecond},
		{name: "p50 of 16 is the 8th", samples: sixteen, p: 50, want: 8 * time.Millisecond},
		{name: "p99 of 16 is the largest", samples: sixteen, p: 99, want: 16 * time.Millisecond},
		{name: "p100 is the largest", samples: sixteen, p: 100, want: 16 * time.Millisecond},
		{name: "tiny p is the smallest", samples: sixteen, p: 0.1, want: 1 * time.Millisecond},
		{name: "p50 of odd count is the median", samples: ms(3, 1, 2), p: 50, want: 2 * time.Millisecond},
		{name: "p99 of 200 is the 198th", samples: func() []time.Duration {
			d := make([]time.Duration, 200)
			for i := range d {
				d[i] = time.Duration(200-i) * time.Millisecond
			}
			return d
		}(), p: 99, want: 198 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]time.Duration(nil), tt.samples...)
			if got := Percentile(tt.samples, tt.p); got != tt.want {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tt.samples, tt.p, got, tt.want)
			}
			for i := range in {
				if in[i] != tt.samples[i] {
					t.Fatalf("Percentile reordered its input")
				}
			}
		})
	}
}

func TestPod(t *testing.T) {
	o := PodOptions{Namespace: "rdmanet-bench", Image: "localhost/testbox:latest", Batch: "b0"}
	tests := []struct {
		name     string
		row      Row
		wantName string
		network  string // the networks annotation's NAD, "" for none
		resource string // "" with a network: the device comes from claim
		claim    string // the pod's claim template
	}{
		{name: "exclusive: seed NAD and a VF", row: RowExclusive, wantName: "rdmanet-exclusive-b0-3", network: ExclusiveNAD, resource: VFResource},
		{name: "dra: seed NAD and a claim for a VF, no extended resource", row: RowDRA, wantName: "rdmanet-dra-b0-3", network: ExclusiveNAD, claim: ClaimTemplate},
		{name: "plain: no annotation, no resource", row: RowPlain, wantName: "plain-b0-3"},
		{name: "rdmanet shared: macvlan NAD and the shared HCA", row: RowShared, wantName: "rdmanet-shared-b0-3", network: SharedNAD, resource: SharedResource},
		{name: "multus shared: the same pod", row: RowMultus, wantName: "multus-shared-b0-3", network: SharedNAD, resource: SharedResource},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Pod(tt.row, o, 3)
			if p.Name != tt.wantName || p.Namespace != o.Namespace {
				t.Errorf("pod %s/%s, want %s/%s", p.Namespace, p.Name, o.Namespace, tt.wantName)
			}
			if p.Labels[LabelBatch] != "b0" || p.Labels[LabelRow] != tt.row.Key() || p.Labels[LabelCreatedBy] != CreatedBy {
				t.Errorf("labels %v", p.Labels)
			}
			c := p.Spec.Containers[0]
			if c.Image != o.Image || c.ImagePullPolicy != corev1.PullNever || strings.Join(c.Command, " ") != "sleep infinity" {
				t.Errorf("container %+v: want the test image, never pulled, sleep infinity", c)
			}
			ann := p.Annotations["k8s.v1.cni.cncf.io/networks"]
			if tt.network == "" {
				if ann != "" || len(c.Resources.Limits) != 0 {
					t.Errorf("plain pod has networks %q, limits %v", ann, c.Resources.Limits)
				}
				return
			}
			var sel []struct{ Name, Interface string }
			if err := json.Unmarshal([]byte(ann), &sel); err != nil || len(sel) != 1 || sel[0].Name != tt.network || sel[0].Interface != "net1" {
				t.Errorf("networks annotation %q (%v): want one %s as net1", ann, err, tt.network)
			}
			if tt.claim != "" {
				rc := p.Spec.ResourceClaims
				if len(rc) != 1 || rc[0].ResourceClaimTemplateName == nil || *rc[0].ResourceClaimTemplateName != tt.claim ||
					len(c.Resources.Claims) != 1 || c.Resources.Claims[0].Name != rc[0].Name || len(c.Resources.Limits) != 0 {
					t.Errorf("pod claims %+v, container claims %+v, limits %v: want the container to use one claim from template %s and no extended resource", rc, c.Resources.Claims, c.Resources.Limits, tt.claim)
				}
			} else {
				q := c.Resources.Limits[corev1.ResourceName(tt.resource)]
				r := c.Resources.Requests[corev1.ResourceName(tt.resource)]
				if q.Value() != 1 || r.Value() != 1 {
					t.Errorf("limits %v requests %v: want 1 %s", c.Resources.Limits, c.Resources.Requests, tt.resource)
				}
			}
			if c.SecurityContext == nil || len(c.SecurityContext.Capabilities.Add) != 1 || c.SecurityContext.Capabilities.Add[0] != "IPC_LOCK" {
				t.Errorf("RDMA pod lacks IPC_LOCK: %+v", c.SecurityContext)
			}
		})
	}
}

func TestExclusiveNADManifest(t *testing.T) {
	seed, err := os.ReadFile("../../../examples/seeds/exclusive/nad.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		in      string
		wantErr string
	}{
		{name: "the seed NAD", in: string(seed)},
		{name: "no namespace", in: strings.ReplaceAll(string(seed), "namespace: ai-training", ""), wantErr: "want exactly one"},
		{name: "two namespaces", in: string(seed) + "\n# namespace: ai-training\n", wantErr: "found 2"},
		{name: "other resource", in: strings.ReplaceAll(string(seed), VFResource, "example.com/other"), wantErr: "no resourceName"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ExclusiveNADManifest(tt.in, "rdmanet-bench")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var nad struct {
				Metadata struct{ Name, Namespace string }
				Spec     struct{ Config string }
			}
			if err := yaml.Unmarshal([]byte(got), &nad); err != nil {
				t.Fatal(err)
			}
			if nad.Metadata.Namespace != "rdmanet-bench" || nad.Metadata.Name != ExclusiveNAD {
				t.Errorf("NAD %s/%s", nad.Metadata.Namespace, nad.Metadata.Name)
			}
			// Only the namespace changed.
			if strings.Replace(got, "namespace: rdmanet-bench", "namespace: ai-training", 1) != tt.in {
				t.Errorf("more than the namespace changed:\n%s", got)
			}
		})
	}
}

func TestSharedNADManifest(t *testing.T) {
	tests := []struct {
		name string
		ipam string
	}{
		{name: "rdmanet-ipam", ipam: "rdmanet-ipam"},
		{name: "real whereabouts", ipam: "whereabouts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := SharedNetwork{Master: "ens8f0np0", IPAM: tt.ipam}.NADManifest("rdmanet-bench")
			if err != nil {
				t.Fatal(err)
			}
			var nad struct {
				Kind     string
				Metadata struct {
					Name, Namespace string
					Labels          map[string]string
					Annotations     map[string]string
				}
				Spec struct{ Config string }
			}
			if err := yaml.Unmarshal([]byte(m), &nad); err != nil {
				t.Fatalf("%v\n%s", err, m)
			}
			if nad.Kind != "NetworkAttachmentDefinition" || nad.Metadata.Name != SharedNAD || nad.Metadata.Namespace != "rdmanet-bench" {
				t.Errorf("object %s %s/%s", nad.Kind, nad.Metadata.Namespace, nad.Metadata.Name)
			}
			if len(nad.Metadata.Annotations) != 0 {
				t.Errorf("shared NAD has annotations %v: the seed's generated NAD has no resourceName", nad.Metadata.Annotations)
			}
			var cfg struct {
				Type, Master, Mode string
				MTU                int
				IPAM               struct {
					Type, Range, Gateway string
					Exclude              []string
				}
			}
			if err := json.Unmarshal([]byte(nad.Spec.Config), &cfg); err != nil {
				t.Fatalf("config %q: %v", nad.Spec.Config, err)
			}
			if cfg.Type != "macvlan" || cfg.Master != "ens8f0np0" || cfg.Mode != "bridge" || cfg.MTU != 9000 {
				t.Errorf("config %+v: want a bridge-mode macvlan over ens8f0np0, MTU 9000", cfg)
			}
			if cfg.IPAM.Type != tt.ipam || cfg.IPAM.Range != "192.168.2.0/24" || cfg.IPAM.Gateway != "192.168.2.1" ||
				len(cfg.IPAM.Exclude) != 1 || cfg.IPAM.Exclude[0] != "192.168.2.0/28" {
				t.Errorf("ipam %+v", cfg.IPAM)
			}
		})
	}
}

func TestMultusAndWhereaboutsConfig(t *testing.T) {
	t.Run("multus from a 1.0.0 conflist master", func(t *testing.T) {
		name, b, err := MultusConf([]byte(bridgeConflist))
		if err != nil {
			t.Fatal(err)
		}
		if name != "00-multus.conflist" || name >= RdmanetConfFile {
			t.Errorf("file %s: want 00-multus.conflist, sorting before %s (the runtime takes the first)", name, RdmanetConfFile)
		}
		var c struct {
			CNIVersion string `json:"cniVersion"`
			Name       string
			Plugins    []map[string]any
		}
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		if c.CNIVersion != "1.0.0" || c.Name != "multus-cni-network" || len(c.Plugins) != 1 {
			t.Fatalf("conflist %s", b)
		}
		p := c.Plugins[0]
		for k, v := range map[string]any{"type": "multus", "kubeconfig": MultusKubeconfig, "cniDir": MultusCNIDir, "binDir": "/opt/cni/bin"} {
			if p[k] != v {
				t.Errorf("%s = %v, want %v", k, p[k], v)
			}
		}
		if caps, _ := p["capabilities"].(map[string]any); caps["portMappings"] != true {
			t.Errorf("capabilities %v: the master's portMappings not lifted", p["capabilities"])
		}
		ds, _ := p["delegates"].([]any)
		if len(ds) != 1 {
			t.Fatalf("delegates %v", p["delegates"])
		}
		if d, _ := ds[0].(map[string]any); d["name"] != "k8s-pod-network" || len(d["plugins"].([]any)) != 2 {
			t.Errorf("delegate %v: want the master conflist verbatim", d)
		}
	})
	t.Run("multus from a 0.3.1 conf master", func(t *testing.T) {
		name, b, err := MultusConf([]byte(`{"cniVersion": "0.3.1", "name": "cbr0", "type": "flannel", "capabilities": {"bandwidth": true}}`))
		if err != nil {
			t.Fatal(err)
		}
		var c map[string]any
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		if name != "00-multus.conf" || c["type"] != "multus" || c["cniVersion"] != "0.3.1" || c["name"] != "multus-cni-network" {
			t.Errorf("%s: %s", name, b)
		}
		if caps, _ := c["capabilities"].(map[string]any); caps["bandwidth"] != true {
			t.Errorf("capabilities %v", c["capabilities"])
		}
	})
	t.Run("master without cniVersion", func(t *testing.T) {
		if _, _, err := MultusConf([]byte(`{"name": "x", "type": "bridge"}`)); err == nil {
			t.Error("no error")
		}
	})
	t.Run("whereabouts flat file", func(t *testing.T) {
		b, err := WhereaboutsConf()
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			Datastore  string
			Kubernetes struct{ Kubeconfig string }
		}
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		if c.Datastore != "kubernetes" || c.Kubernetes.Kubeconfig != WhereaboutsKubeconfig {
			t.Errorf("flat file %s", b)
		}
		if !strings.HasPrefix(WhereaboutsKubeconfig, "/etc/cni/net.d/"+filepath.Dir(WhereaboutsFlatConf)+"/") {
			t.Errorf("kubeconfig %s not beside the flat file %s", WhereaboutsKubeconfig, WhereaboutsFlatConf)
		}
	})
	t.Run("kubeconfig", func(t *testing.T) {
		b := Kubeconfig("https://10.250.0.2:6443", []byte("CA"), []byte("CERT"), []byte("KEY"))
		cfg, err := clientcmd.Load(b)
		if err != nil {
			t.Fatal(err)
		}
		ctx := cfg.Contexts[cfg.CurrentContext]
		if ctx == nil {
			t.Fatalf("no current context in\n%s", b)
		}
		if ctx.Namespace != "" {
			t.Errorf("context namespace %q: Whereabouts would keep its pools there instead of kube-system", ctx.Namespace)
		}
		cl, u := cfg.Clusters[ctx.Cluster], cfg.AuthInfos[ctx.AuthInfo]
		if cl == nil || u == nil {
			t.Fatalf("context %+v refers to missing entries", ctx)
		}
		if cl.Server != "https://10.250.0.2:6443" || string(cl.CertificateAuthorityData) != "CA" ||
			string(u.ClientCertificateData) != "CERT" || string(u.ClientKeyData) != "KEY" {
			t.Errorf("kubeconfig %+v %+v", cl, u)
		}
	})
}

func TestCRDName(t *testing.T) {
	tests := []struct {
		name, file, want string
		wantErr          bool
	}{
		{name: "ippools", file: "/x/whereabouts.cni.cncf.io_ippools.yaml", want: "ippools.whereabouts.cni.cncf.io"},
		{name: "reservations", file: "whereabouts.cni.cncf.io_overlappingrangeipreservations.yaml", want: "overlappingrangeipreservations.whereabouts.cni.cncf.io"},
		{name: "not a CRD file", file: "daemonset-install.yaml", wantErr: true},
		{name: "empty plural", file: "whereabouts.cni.cncf.io_.yaml", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CRDName(tt.file)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("CRDName(%s) = %q, %v; want %q, error %v", tt.file, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestPodSpread(t *testing.T) {
	tests := []struct {
		name   string
		spread bool
	}{
		{name: "one node: no constraint", spread: false},
		{name: "several nodes: max skew 1 over node names, hard", spread: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Pod(RowShared, PodOptions{Namespace: "ns", Image: "i", Batch: "p2b0", Spread: tt.spread}, 0)
			c := p.Spec.TopologySpreadConstraints
			if !tt.spread {
				if len(c) != 0 {
					t.Fatalf("constraints %+v, want none", c)
				}
				return
			}
			if len(c) != 1 || c[0].MaxSkew != 1 || c[0].TopologyKey != corev1.LabelHostname || c[0].WhenUnsatisfiable != corev1.DoNotSchedule {
				t.Fatalf("constraints %+v, want one hard max-skew-1 spread over %s", c, corev1.LabelHostname)
			}
			// The constraint counts exactly the batch's pods of the row.
			sel := c[0].LabelSelector.MatchLabels
			if len(sel) != 2 || sel[LabelRow] != p.Labels[LabelRow] || sel[LabelBatch] != "p2b0" {
				t.Errorf("selector %v, want the pod's row and batch labels", sel)
			}
		})
	}
}

func TestPerNode(t *testing.T) {
	tests := []struct {
		name              string
		pods, nodes, want int
	}{
		{name: "48 over 3", pods: 48, nodes: 3, want: 16},
		{name: "uneven rounds up", pods: 49, nodes: 3, want: 17},
		{name: "one node takes all", pods: 16, nodes: 1, want: 16},
		{name: "fewer pods than nodes", pods: 2, nodes: 3, want: 1},
		{name: "no nodes", pods: 5, nodes: 0, want: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PerNode(tt.pods, tt.nodes); got != tt.want {
				t.Errorf("PerNode(%d, %d) = %d, want %d", tt.pods, tt.nodes, got, tt.want)
			}
		})
	}
}

// secsOf is a batch's samples from seconds.
func secsOf(v ...float64) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x * float64(time.Second))
	}
	return out
}

// batchesAt makes one batch per p50 (each of three equal samples) in phase.
func batchesAt(phase int, p50s ...float64) []Batch {
	out := make([]Batch, len(p50s))
	for i, x := range p50s {
		out[i] = Batch{Phase: phase, Samples: secsOf(x, x, x), Wall: secsOf(x + 1)[0]}
	}
	return out
}

func TestLine(t *testing.T) {
	one := Result{Row: RowExclusive, Batches: []Batch{{Phase: PhaseExclusive, Samples: secsOf(2.5, 2.5, 2.5, 4), Wall: 4 * time.Second}}}
	if got, want := one.Line(1, 16), "cluster-bench: stack=rdmanet mode=exclusive nodes=1 pods=16 p50=2.50s p99=4.00s wall=4.00s"; got != want {
		t.Errorf("line\n got %s\nwant %s", got, want)
	}
	five := Result{Row: RowShared, Batches: batchesAt(PhaseShared, 2.2, 2.0, 3.1, 2.4, 2.3)}
	if got, want := five.Line(3, 48), "cluster-bench: stack=rdmanet mode=shared nodes=3 pods=48 p50=2.30s p99=3.10s wall=3.40s batches=5 batch_p50=2.30s (2.00s..3.10s)"; got != want {
		t.Errorf("line\n got %s\nwant %s", got, want)
	}
}

func TestRunsAndVerdict(t *testing.T) {
	// The plain row runs in both phases: its phase-1 batches are the
	// exclusive row's baseline, its phase-2 batches the shared rows'.
	plain := Result{Row: RowPlain, Batches: append(batchesAt(PhaseExclusive, 2, 2, 2), batchesAt(PhaseShared, 3, 3, 3)...)}
	excl := Result{Row: RowExclusive, Batches: batchesAt(PhaseExclusive, 2.5, 2.6, 2.4)}
	shared := Result{Row: RowShared, Batches: batchesAt(PhaseShared, 3.2, 3.1, 3.3)}
	multus := Result{Row: RowMultus, Batches: batchesAt(PhaseShared, 5, 6, 4)}
	// Run 3 misses: 0.9 s added against Multus' 1 s.
	sharedMiss := Result{Row: RowShared, Batches: batchesAt(PhaseShared, 3.2, 3.1, 3.9)}
	fastMultus := Result{Row: RowMultus, Batches: batchesAt(PhaseShared, 2.9, 2.9, 2.9)}

	t.Run("runs pair batch k with the plain batch k of its phase", func(t *testing.T) {
		runs := Runs([]Result{plain, excl, shared, multus})
		want := []string{
			"cluster-bench: run=1 added p50 over plain: rdmanet exclusive=+0.50s rdmanet shared=+0.20s multus+whereabouts shared=+2.00s ratio=0.10",
			"cluster-bench: run=2 added p50 over plain: rdmanet exclusive=+0.60s rdmanet shared=+0.10s multus+whereabouts shared=+3.00s ratio=0.03",
			"cluster-bench: run=3 added p50 over plain: rdmanet exclusive=+0.40s rdmanet shared=+0.30s multus+whereabouts shared=+1.00s ratio=0.30",
		}
		if len(runs) != len(want) {
			t.Fatalf("%d runs, want %d", len(runs), len(want))
		}
		for i, r := range runs {
			if got := r.Line(); got != want[i] {
				t.Errorf("run %d\n got %s\nwant %s", i+1, got, want[i])
			}
			if !r.Met() {
				t.Errorf("run %d: goal not met at ratio %.2f", i+1, r.Ratio)
			}
		}
	})
	tests := []struct {
		name    string
		results []Result
		want    string
	}{
		{name: "met in every run", results: []Result{plain, excl, shared, multus},
			want: "cluster-bench: over 3 runs, added p50 over plain, median (range): rdmanet exclusive=+0.50s (+0.40s..+0.60s) rdmanet shared=+0.20s (+0.10s..+0.30s) multus+whereabouts shared=+2.00s (+1.00s..+3.00s) ratio=0.10 (0.03..0.30) goal < 0.33: met in all 3 runs"},
		{name: "one run missing misses the goal though the median meets it", results: []Result{plain, sharedMiss, multus},
			want: "cluster-bench: over 3 runs, added p50 over plain, median (range): rdmanet shared=+0.20s (+0.10s..+0.90s) multus+whereabouts shared=+2.00s (+1.00s..+3.00s) ratio=0.10 (0.03..0.90) goal < 0.33: missed in run 3 (2 of 3 met)"},
		{name: "multus added nothing: no ratio", results: []Result{plain, shared, fastMultus},
			want: "cluster-bench: over 3 runs, added p50 over plain, median (range): rdmanet shared=+0.20s (+0.10s..+0.30s) multus+whereabouts shared=-0.10s (-0.10s..-0.10s) ratio=n/a (multus+whereabouts added no time)"},
		{name: "no multus row", results: []Result{plain, excl},
			want: "cluster-bench: over 3 runs, added p50 over plain, median (range): rdmanet exclusive=+0.50s (+0.40s..+0.60s) ratio=n/a (both shared rows needed)"},
		{name: "no plain row", results: []Result{excl, multus},
			want: "cluster-bench: added time: no plain row to compare with"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Verdict(tt.results); got != tt.want {
				t.Errorf("verdict\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestParseRows(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []Row
		wantErr bool
	}{
		{name: "all", in: "all", want: RowOrder},
		{name: "empty is all", in: "", want: RowOrder},
		{name: "run order, not list order", in: "multus,plain", want: []Row{RowPlain, RowMultus}},
		{name: "dra after exclusive", in: "dra,exclusive", want: []Row{RowExclusive, RowDRA}},
		{name: "unknown", in: "plain,calico", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRows(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v", err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("rows %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("rows %v, want %v", got, tt.want)
				}
			}
		})
	}
}

// TestUndo: the node-file steps of the Multus install put every file back
// as it was, whatever existed before.
func TestUndo(t *testing.T) {
	tests := []struct {
		name   string
		before map[string]string // relative path -> content
		steps  func(u *undo, d string) error
		during map[string]string // "" content: must not exist
	}{
		{
			name:   "place over an existing file, move another aside",
			before: map[string]string{"bin/whereabouts": "rdmanet-ipam", "conf/00-rdmanet.conf": "rdmanet"},
			steps: func(u *undo, d string) error {
				if err := u.place(filepath.Join(d, "bin/whereabouts"), []byte("real"), 0o755); err != nil {
					return err
				}
				if err := u.place(filepath.Join(d, "conf/00-multus.conf"), []byte("multus"), 0o644); err != nil {
					return err
				}
				return u.moveAside(filepath.Join(d, "conf/00-rdmanet.conf"))
			},
			during: map[string]string{"bin/whereabouts": "real", "bin/whereabouts" + savedSuffix: "rdmanet-ipam",
				"conf/00-multus.conf": "multus", "conf/00-rdmanet.conf": ""},
		},
		{
			name:   "new dir with a file, missing file moved aside",
			before: map[string]string{"conf/keep": "x"},
			steps: func(u *undo, d string) error {
				if err := u.mkdir(filepath.Join(d, "conf/multus.d"), 0o700); err != nil {
					return err
				}
				if err := u.place(filepath.Join(d, "conf/multus.d/multus.kubeconfig"), []byte("kc"), 0o600); err != nil {
					return err
				}
				return u.moveAside(filepath.Join(d, "conf/absent"))
			},
			during: map[string]string{"conf/multus.d/multus.kubeconfig": "kc"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := t.TempDir()
			for _, sub := range []string{"bin", "conf"} {
				if err := os.MkdirAll(filepath.Join(d, sub), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for p, c := range tt.before {
				if err := os.WriteFile(filepath.Join(d, p), []byte(c), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			snap := tree(t, d)
			u := &undo{}
			if err := tt.steps(u, d); err != nil {
				t.Fatal(err)
			}
			for p, want := range tt.during {
				b, err := os.ReadFile(filepath.Join(d, p))
				if want == "" {
					if err == nil {
						t.Errorf("%s exists during the run", p)
					}
					continue
				}
				if string(b) != want {
					t.Errorf("%s = %q (%v) during the run, want %q", p, b, err, want)
				}
			}
			if err := u.run(); err != nil {
				t.Fatal(err)
			}
			if got := tree(t, d); got != snap {
				t.Errorf("after undo:\n%s\nwant:\n%s", got, snap)
			}
		})
	}
	t.Run("leftover saved copy refused", func(t *testing.T) {
		d := t.TempDir()
		p := filepath.Join(d, "00-rdmanet.conf")
		for _, f := range []string{p, p + savedSuffix} {
			if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		u := &undo{}
		if err := u.moveAside(p); err == nil || !strings.Contains(err.Error(), "mv ") {
			t.Fatalf("err %v, want a refusal naming the mv that restores it", err)
		}
		if len(u.steps) != 0 {
			t.Error("refused step registered an undo")
		}
	})
}

// tree lists every path under d with its content.
func tree(t *testing.T, d string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(d, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(d, p)
		if info.IsDir() {
			b.WriteString(rel + "/\n")
			return nil
		}
		c, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		b.WriteString(rel + " " + info.Mode().String() + " " + string(c) + "\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

const bridgeConflist = `{
  "cniVersion": "1.0.0",
  "name": "k8s-pod-network",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.0.0/24"}]]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}`

func TestMasterConfig(t *testing.T) {
	d := t.TempDir()
	files := map[string]string{
		"00-rdmanet.conf":                `{"cniVersion": "0.3.1", "name": "rdmanet", "type": "rdmanet"}`,
		"10-k8s-pod-network.conflist":    bridgeConflist,
		"99-broken.conf":                 `{`,
		"whereabouts.d/whereabouts.conf": `{"name": "k8s-pod-network"}`,
		"00-rdmanet.conf" + savedSuffix:  `{"name": "saved"}`,
		"05-other.conflist":              `{"cniVersion": "1.0.0", "name": "other", "plugins": []}`,
	}
	for p, c := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(d, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		network string
		want    string
		wantErr bool
	}{
		{name: "the bridge network by name", network: "k8s-pod-network", want: bridgeConflist},
		{name: "a single conf by name", network: "rdmanet", want: files["00-rdmanet.conf"]},
		{name: "missing", network: "calico", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MasterConfig(d, tt.network)
			if (err != nil) != tt.wantErr || string(got) != tt.want {
				t.Errorf("MasterConfig(%s) = %q, %v", tt.network, got, err)
			}
		})
	}
}
