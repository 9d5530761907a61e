package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseDocumentsAndLines(t *testing.T) {
	src := `# leading comment
---
apiVersion: v1
kind: Service
metadata:
  name: a
  namespace: ns1
---
# only a comment
---
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: ConfigMap
    metadata: {name: b}
  - apiVersion: v1
    kind: ConfigMap
    metadata: {name: c}
...
--- {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "d"}}
`
	objs, err := Parse("x.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.Ref()+"@"+o.Source.String())
	}
	want := []string{"Service/ns1/a@x.yaml:3", "ConfigMap/b@x.yaml:11", "ConfigMap/c@x.yaml:11", "Pod/d@x.yaml:21"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("got %v\nwant %v", got, want)
	}
}

func TestParseErrorsNameFileAndLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		line int
		msg  string
	}{
		{name: "bad indentation in second document", src: "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: b\n   bad: x\n", line: 9, msg: "mapping values"},
		{name: "error after leading comments", src: "# c1\n# c2\napiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n   bad: x\n", line: 7, msg: "mapping values"},
		{name: "missing kind", src: "apiVersion: v1\nmetadata: {name: a}\n", line: 1, msg: "no apiVersion/kind"},
		{name: "scalar document", src: "---\njust a string\n", line: 2, msg: "want a Kubernetes object"},
		{name: "broken JSON", src: "{\"apiVersion\": \"v1\",\n \"kind\": \"Pod\",,}\n", line: 2, msg: ""},
		{name: "list items not objects", src: "apiVersion: v1\nkind: List\nitems: [1]\n", line: 1, msg: "items[0]"},
		{name: "unquoted n as name", src: "apiVersion: v1\nkind: Pod\nmetadata: {name: n}\n", line: 1, msg: "metadata.name is a boolean"},
		{name: "label value is a number", src: "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  labels: {node-index: 0}\n", line: 1, msg: "labels[node-index] is a number"},
		{name: "metadata not a map", src: "apiVersion: v1\nkind: Pod\nmetadata: [a]\n", line: 1, msg: "metadata"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("in.yaml", []byte(tc.src))
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want *ParseError", err)
			}
			if pe.File != "in.yaml" || pe.Line != tc.line {
				t.Errorf("position %s:%d, want in.yaml:%d (%v)", pe.File, pe.Line, tc.line, err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q lacks %q", err, tc.msg)
			}
		})
	}
}

func TestReadPaths(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("b.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n")
	write("sub/a.json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`)
	write("notes.txt", "not yaml: [")
	objs, err := ReadPaths([]string{dir, "-"}, strings.NewReader("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: stdin}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range objs {
		names = append(names, o.Name)
	}
	if strings.Join(names, ",") != "b,a,stdin" {
		t.Errorf("names = %v, want b,a,stdin (lexical walk, .txt skipped, then stdin)", names)
	}
	_, err = ReadPaths([]string{filepath.Join(dir, "missing.yaml")}, nil)
	var pe *ParseError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: err = %v", err)
	}
}

func TestPodTemplatesByKind(t *testing.T) {
	tmpl := `{"metadata":{"labels":{"app":"x"}},"spec":{"containers":[{"name":"c","image":"i"}]}}`
	for _, tc := range []struct {
		name  string
		doc   string
		paths []string
		roles []string
	}{
		{name: "Pod", doc: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c"}]}}`, paths: []string{""}},
		{name: "Deployment", doc: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":` + tmpl + `}}`, paths: []string{"spec.template"}},
		{name: "StatefulSet", doc: `{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"d"},"spec":{"template":` + tmpl + `}}`, paths: []string{"spec.template"}},
		{name: "DaemonSet", doc: `{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"d"},"spec":{"template":` + tmpl + `}}`, paths: []string{"spec.template"}},
		{name: "Job", doc: `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j"},"spec":{"template":` + tmpl + `}}`, paths: []string{"spec.template"}},
		{name: "CronJob", doc: `{"apiVersion":"batch/v1","kind":"CronJob","metadata":{"name":"j"},"spec":{"jobTemplate":{"spec":{"template":` + tmpl + `}}}}`, paths: []string{"spec.jobTemplate.spec.template"}},
		{name: "PyTorchJob", doc: `{"apiVersion":"kubeflow.org/v1","kind":"PyTorchJob","metadata":{"name":"j"},"spec":{"pytorchReplicaSpecs":{"Worker":{"template":` + tmpl + `},"Master":{"template":` + tmpl + `}}}}`, paths: []string{"spec.pytorchReplicaSpecs.Master.template", "spec.pytorchReplicaSpecs.Worker.template"}, roles: []string{"Master", "Worker"}},
		{name: "MPIJob", doc: `{"apiVersion":"kubeflow.org/v2beta1","kind":"MPIJob","metadata":{"name":"j"},"spec":{"slotsPerWorker":8,"mpiReplicaSpecs":{"Launcher":{"template":` + tmpl + `},"Worker":{"template":` + tmpl + `}}}}`, paths: []string{"spec.mpiReplicaSpecs.Launcher.template", "spec.mpiReplicaSpecs.Worker.template"}, roles: []string{"Launcher", "Worker"}},
		{name: "Volcano Job", doc: `{"apiVersion":"batch.volcano.sh/v1alpha1","kind":"Job","metadata":{"name":"j"},"spec":{"minAvailable":2,"tasks":[{"name":"master","replicas":1,"template":` + tmpl + `},{"name":"worker","template":` + tmpl + `}]}}`, paths: []string{"spec.tasks[0].template", "spec.tasks[1].template"}, roles: []string{"master", "worker"}},
		{name: "JobSet", doc: `{"apiVersion":"jobset.x-k8s.io/v1alpha2","kind":"JobSet","metadata":{"name":"j"},"spec":{"replicatedJobs":[{"name":"workers","template":{"spec":{"template":` + tmpl + `}}}]}}`, paths: []string{"spec.replicatedJobs[0].template.spec.template"}, roles: []string{"workers"}},
		{name: "LeaderWorkerSet", doc: `{"apiVersion":"leaderworkerset.x-k8s.io/v1","kind":"LeaderWorkerSet","metadata":{"name":"j"},"spec":{"leaderWorkerTemplate":{"size":4,"leaderTemplate":` + tmpl + `,"workerTemplate":` + tmpl + `}}}`, paths: []string{"spec.leaderWorkerTemplate.leaderTemplate", "spec.leaderWorkerTemplate.workerTemplate"}, roles: []string{"leader", "worker"}},
		{name: "ConfigMap is no workload", doc: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Parse("t.json", []byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			ts, err := PodTemplates(objs[0])
			if err != nil {
				t.Fatal(err)
			}
			if len(ts) != len(tc.paths) {
				t.Fatalf("got %d templates, want %d", len(ts), len(tc.paths))
			}
			for i, pt := range ts {
				if pt.Path != tc.paths[i] {
					t.Errorf("template %d path %q, want %q", i, pt.Path, tc.paths[i])
				}
				if tc.roles != nil && pt.Role != tc.roles[i] {
					t.Errorf("template %d role %q, want %q", i, pt.Role, tc.roles[i])
				}
				if len(pt.Spec.Containers) != 1 {
					t.Errorf("template %d has %d containers", i, len(pt.Spec.Containers))
				}
			}
		})
	}
}

func TestPodTemplateTypeError(t *testing.T) {
	src := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: ns1}\nspec:\n  template:\n    spec:\n      containers:\n        - name: c\n          env:\n            - name: NCCL_IB_GID_INDEX\n              value: 3\n"
	objs, err := Parse("d.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	_, err = PodTemplates(objs[0])
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != 1 || !strings.Contains(err.Error(), "Deployment/ns1/d") || !strings.Contains(err.Error(), "env.value") {
		t.Fatalf("err = %v; want a ParseError at d.yaml:1 naming Deployment/ns1/d and the env.value field", err)
	}
}

func TestParseNetworks(t *testing.T) {
	for _, tc := range []struct {
		name, key, value string
		want             []string // ns/name@if
		err              string
	}{
		{name: "comma list with interfaces", key: NetworksAnnotation, value: "a@eth1, other/b", want: []string{"/a@eth1", "other/b@net2"}},
		{name: "JSON list", key: NetworksAnnotation, value: `[{"name":"a","namespace":"x","interface":"net1"},{"name":"b"}]`, want: []string{"x/a@net1", "/b@net2"}},
		{name: "TKE skips the default network", key: TKENetworksAnnotation, value: "tke-bridge,rdma@eth1", want: []string{"/rdma@eth1"}},
		{name: "TKE without interface", key: TKENetworksAnnotation, value: "tke-bridge,rdma", want: []string{"/rdma@"}},
		{name: "empty", key: NetworksAnnotation, value: ""},
		{name: "only spaces: Multus reads one network with an empty name", key: NetworksAnnotation, value: "  ", err: "only spaces"},
		{name: "spaces around separators, as Multus trims them", key: NetworksAnnotation, value: " other / b @ net3 ", want: []string{"other/b@net3"}},
		{name: "JSON interfaceRequest, the pre-3.2 spelling Multus still reads", key: NetworksAnnotation, value: `[{"name":"a","interfaceRequest":"net5"}]`, want: []string{"/a@net5"}},
		{name: "two @ (Multus refuses)", key: NetworksAnnotation, value: "a@net1@net2", err: "failed at '@'"},
		{name: "two / (Multus refuses)", key: NetworksAnnotation, value: "x/y/a", err: "failed at '/'"},
		{name: "namespace not a DNS-1123 label (Multus refuses)", key: NetworksAnnotation, value: "Bad_NS/a", err: `namespace "Bad_NS" is not a DNS-1123 label`},
		{name: "dotted name in the short form (Multus refuses)", key: NetworksAnnotation, value: "sriov.rdma", err: `name "sriov.rdma"`},
		{name: "interface over 15 bytes (Multus refuses)", key: NetworksAnnotation, value: "a@averyveryverylongname", err: "at most 15 bytes"},
		{name: "a quote selects the JSON form, as in Multus", key: NetworksAnnotation, value: `a@"x"`, err: "not a JSON list"},
		{name: "bare JSON object (Multus refuses)", key: NetworksAnnotation, value: `{"name":"a"}`, err: "wrap the object in [ ]"},
		{name: "bad mac (Multus refuses)", key: NetworksAnnotation, value: `[{"name":"a","mac":"zz"}]`, err: `mac "zz"`},
		{name: "bad CIDR (Multus refuses)", key: NetworksAnnotation, value: `[{"name":"a","ips":["10.0.0.1/33"]}]`, err: `"10.0.0.1/33" is not a CIDR`},
		{name: "stray comma: Multus takes an empty name and fails later", key: NetworksAnnotation, value: "a,,b", err: "element 1 is empty"},
		{name: "no name before @: Multus takes it and fails later", key: NetworksAnnotation, value: "@net1", err: "has no network name"},
		{name: "bad JSON", key: NetworksAnnotation, value: `[{"name":}]`, err: "JSON"},
		{name: "JSON element without name", key: NetworksAnnotation, value: `[{"interface":"net1"}]`, err: "no \"name\""},
		{name: "empty interface after @ means the default name, as in Multus", key: NetworksAnnotation, value: "a@", want: []string{"/a@net1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sels, err := ParseNetworks(tc.key, tc.value)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range sels {
				got = append(got, s.Namespace+"/"+s.Name+"@"+s.Interface)
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPoolsAndNADs(t *testing.T) {
	src := `apiVersion: mellanox.com/v1alpha1
kind: NicClusterPolicy
metadata: {name: p}
spec:
  rdmaSharedDevicePlugin:
    config: '{"configList":[{"resourceName":"hca","rdmaHcaMax":8,"selectors":{"ifNames":["ens1"]}}]}'
  sriovDevicePlugin:
    config: '{"resourceList":[{"resourceName":"vf","selectors":{"pfNames":["ens2#0-7"],"isRdma":true}}]}'
---
apiVersion: spiderpool.spidernet.io/v2beta1
kind: SpiderMultusConfig
metadata: {name: s, namespace: kube-system}
spec:
  cniType: sriov
  sriov: {resourceName: spidernet.io/vf}
  enableRdma: true
---
apiVersion: mellanox.com/v1alpha1
kind: MacvlanNetwork
metadata: {name: m}
spec: {master: ens1, mtu: 9000, networkNamespace: ai, ipam: '{"type":"whereabouts","range":"10.0.0.0/24"}'}
`
	objs, err := Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	pools, errs := PoolsFromObject(objs[0])
	if len(errs) != 0 || len(pools) != 2 {
		t.Fatalf("pools %d errs %v", len(pools), errs)
	}
	if pools[0].FullName() != "intel.com/vf" || pools[0].Kind != PoolExclusive || pools[0].PFNames[0] != "ens2" || !pools[0].IsRdma {
		t.Errorf("sriov pool = %+v", pools[0])
	}
	if pools[1].FullName() != "rdma/hca" || pools[1].Kind != PoolShared || pools[1].RdmaHcaMax != 8 {
		t.Errorf("shared pool = %+v", pools[1])
	}
	smc := NADFromObject(objs[1])[0]
	if smc.ResourceName != "spidernet.io/vf" || !smc.Config.Has("sriov") || smc.Config.Index("rdma") != 1 {
		t.Errorf("SpiderMultusConfig NAD = %+v", smc)
	}
	mv := NADFromObject(objs[2])[0]
	if mv.Namespace != "ai" || mv.Master != "ens1" || mv.MTU != 9000 || mv.Config.Plugins[0].IPAM()["type"] != "whereabouts" {
		t.Errorf("MacvlanNetwork NAD = %+v", mv)
	}
}

func TestPoolConfigDetection(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value string
		pools int
		errs  int
	}{
		{name: "sriov resourceList", value: `{"resourceList":[{"resourceName":"a","selectors":{"pfNames":["x"]}}]}`, pools: 1},
		{name: "shared configList", value: `{"configList":[{"resourceName":"a","rdmaHcaMax":1,"selectors":{"ifNames":["x"]}}]}`, pools: 1},
		{name: "script mentioning configList", value: "#!/bin/sh\necho configList resourceList\n", pools: 0},
		{name: "other JSON", value: `{"logLevel":"debug","note":"resourceList"}`, pools: 0},
		{name: "broken pool JSON is reported", value: `{"resourceList": [}`, errs: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &Object{APIVersion: "v1", Kind: "ConfigMap", Name: "c", Data: map[string]any{"data": map[string]any{"config.json": tc.value}}}
			pools, errs := PoolsFromObject(o)
			if len(pools) != tc.pools || len(errs) != tc.errs {
				t.Errorf("pools %d errs %d, want %d %d", len(pools), len(errs), tc.pools, tc.errs)
			}
		})
	}
}

func TestParseCRLFAndBOM(t *testing.T) {
	src := "\ufeffapiVersion: v1\r\nkind: ConfigMap\r\nmetadata: {name: a}\r\n---\r\napiVersion: v1\r\nkind: ConfigMap\r\nmetadata: {name: b}\r\n"
	objs, err := Parse("crlf.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].Name != "a" || objs[1].Name != "b" || objs[1].Source.Line != 5 {
		t.Fatalf("got %d objects: %+v", len(objs), objs)
	}
}

func TestSriovNetworkOperatorObjects(t *testing.T) {
	src := `apiVersion: sriovnetwork.openshift.io/v1
kind: SriovNetwork
metadata: {name: rdma-net, namespace: sriov-network-operator}
spec:
  resourceName: mlnx_rdma
  networkNamespace: ai
  vlan: 200
  ipam: '{"type": "whereabouts", "range": "10.60.0.0/16"}'
  metaPlugins: '{"type": "rdma"}'
---
apiVersion: sriovnetwork.openshift.io/v1
kind: SriovNetworkNodePolicy
metadata: {name: p, namespace: sriov-network-operator}
spec:
  resourceName: mlnx_rdma
  isRdma: true
  nicSelector: {pfNames: ["ens1f0np0#0-7"], vendor: "15b3"}
`
	objs, err := Parse("op.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	n := NADFromObject(objs[0])[0]
	if n.Namespace != "ai" || n.ResourceName != "openshift.io/mlnx_rdma" || !n.Config.Has("sriov") || n.Config.Index("rdma") != 1 || n.Config.Plugins[0].IPAM()["type"] != "whereabouts" {
		t.Errorf("SriovNetwork NAD = %+v", n)
	}
	pools, _ := PoolsFromObject(objs[1])
	if len(pools) != 1 || pools[0].FullName() != "openshift.io/mlnx_rdma" || !pools[0].IsRdma || pools[0].PFNames[0] != "ens1f0np0" {
		t.Errorf("SriovNetworkNodePolicy pool = %+v", pools)
	}
}
