package lint

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/manifest"
)

// M is a JSON object under construction.
type M = map[string]any

// ctrB builds a container.
type ctrB struct {
	name       string
	env        [][2]string
	limits     map[string]any
	requests   map[string]any
	caps       []string
	privileged bool
	runAsUser  *int64
	claims     []string // resources.claims names ("claim" or "claim/request")
}

func (c ctrB) obj() M {
	m := M{"name": c.name, "image": "registry.example.com/train:v1"}
	var env []any
	for _, e := range c.env {
		env = append(env, M{"name": e[0], "value": e[1]})
	}
	if env != nil {
		m["env"] = env
	}
	res := M{}
	if c.limits != nil {
		res["limits"] = c.limits
	}
	if c.requests != nil {
		res["requests"] = c.requests
	}
	for _, cl := range c.claims {
		name, req, _ := strings.Cut(cl, "/")
		ref := M{"name": name}
		if req != "" {
			ref["request"] = req
		}
		cls, _ := res["claims"].([]any)
		res["claims"] = append(cls, ref)
	}
	if len(res) > 0 {
		m["resources"] = res
	}
	sc := M{}
	if len(c.caps) > 0 {
		sc["capabilities"] = M{"add": c.caps}
	}
	if c.privileged {
		sc["privileged"] = true
	}
	if c.runAsUser != nil {
		sc["runAsUser"] = *c.runAsUser
	}
	if len(sc) > 0 {
		m["securityContext"] = sc
	}
	return m
}

// setEnv replaces or appends a variable; value "-" removes it.
func (c *ctrB) setEnv(k, v string) {
	for i, e := range c.env {
		if e[0] == k {
			if v == "-" {
				c.env = append(c.env[:i], c.env[i+1:]...)
			} else {
				c.env[i][1] = v
			}
			return
		}
	}
	if v != "-" {
		c.env = append(c.env, [2]string{k, v})
	}
}

// wlB builds a workload (batch/v1 Job unless kind says otherwise).
type wlB struct {
	kind, name, ns string
	labels         map[string]string
	ann            map[string]string
	hostNetwork    bool
	dnsPolicy      string
	subdomain      string
	indexed        bool
	ctrs           []ctrB
	volumes        []any
	antiAffinity   bool
	scheduler      string
	podClaims      []any // spec.resourceClaims
}

func (w wlB) podSpec() M {
	spec := M{"restartPolicy": "Never"}
	var cs []any
	for _, c := range w.ctrs {
		cs = append(cs, c.obj())
	}
	spec["containers"] = cs
	if w.hostNetwork {
		spec["hostNetwork"] = true
	}
	if w.dnsPolicy != "" {
		spec["dnsPolicy"] = w.dnsPolicy
	}
	if w.subdomain != "" {
		spec["subdomain"] = w.subdomain
	}
	if w.volumes != nil {
		spec["volumes"] = w.volumes
	}
	if w.antiAffinity {
		spec["affinity"] = M{"podAntiAffinity": M{"requiredDuringSchedulingIgnoredDuringExecution": []any{
			M{"labelSelector": M{"matchLabels": w.labels}, "topologyKey": "kubernetes.io/hostname"}}}}
	}
	if w.scheduler != "" {
		spec["schedulerName"] = w.scheduler
	}
	if w.podClaims != nil {
		spec["resourceClaims"] = w.podClaims
	}
	return spec
}

func (w wlB) obj() M {
	meta := M{"labels": w.labels}
	if len(w.ann) > 0 {
		meta["annotations"] = w.ann
	}
	switch w.kind {
	case "Pod":
		meta["name"], meta["namespace"] = w.name, w.ns
		spec := w.podSpec()
		delete(spec, "restartPolicy")
		return M{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
	case "PyTorchJob":
		tmpl := M{"metadata": meta, "spec": w.podSpec()}
		return M{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": M{"name": w.name, "namespace": w.ns},
			"spec": M{"pytorchReplicaSpecs": M{"Master": M{"replicas": 1, "template": tmpl}, "Worker": M{"replicas": 3, "template": tmpl}}}}
	case "StatefulSet":
		return M{"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": M{"name": w.name, "namespace": w.ns},
			"spec": M{"serviceName": w.subdomain, "replicas": 2, "selector": M{"matchLabels": w.labels}, "template": M{"metadata": meta, "spec": w.podSpec()}}}
	}
	spec := M{"completions": 2, "parallelism": 2, "template": M{"metadata": meta, "spec": w.podSpec()}}
	if w.indexed {
		spec["completionMode"] = "Indexed"
	}
	return M{"apiVersion": "batch/v1", "kind": "Job", "metadata": M{"name": w.name, "namespace": w.ns}, "spec": spec}
}

func (w *wlB) c() *ctrB { return &w.ctrs[0] }

func nadObj(name, ns, resource string, cfg M) M {
	meta := M{"name": name, "namespace": ns}
	if resource != "" {
		meta["annotations"] = M{manifest.ResourceNameAnnotation: resource}
	}
	b, _ := json.Marshal(cfg)
	return M{"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition", "metadata": meta, "spec": M{"config": string(b)}}
}

func conflist(name string, plugins ...M) M {
	ps := make([]any, len(plugins))
	for i, p := range plugins {
		ps[i] = p
	}
	return M{"cniVersion": "0.3.1", "name": name, "plugins": ps}
}

func rdmanetIPAM() M { return M{"type": "rdmanet-ipam", "range": "10.60.0.0/16"} }

func sriovPlugin() M { return M{"type": "sriov", "vlan": 200, "ipam": rdmanetIPAM()} }

func macvlanPlugin(master string) M {
	return M{"type": "macvlan", "master": master, "mode": "bridge", "mtu": 9000, "ipam": rdmanetIPAM()}
}

func configMap(name, ns string, cfg M) M {
	b, _ := json.Marshal(cfg)
	return M{"apiVersion": "v1", "kind": "ConfigMap", "metadata": M{"name": name, "namespace": ns}, "data": M{"config.json": string(b)}}
}

func sriovPoolCM(prefix, name string, pfNames []string, isRdma bool) M {
	sel := M{"vendors": []string{"15b3"}, "pfNames": pfNames}
	if isRdma {
		sel["isRdma"] = true
	}
	return configMap("sriovdp-config", "kube-system", M{"resourceList": []any{M{"resourcePrefix": prefix, "resourceName": name, "selectors": []any{sel}}}})
}

func sharedPoolCM(name string, ifNames []string, hcaMax int) M {
	return configMap("rdma-devices", "kube-system", M{"configList": []any{M{"resourceName": name, "rdmaHcaMax": hcaMax, "selectors": M{"vendors": []string{"15b3"}, "ifNames": ifNames}}}})
}

func serviceObj(name, ns string, selector map[string]string, headless bool) M {
	spec := M{"selector": selector, "ports": []any{M{"name": "rdzv", "port": 29500}}}
	if headless {
		spec["clusterIP"] = "None"
		spec["publishNotReadyAddresses"] = true
	}
	return M{"apiVersion": "v1", "kind": "Service", "metadata": M{"name": name, "namespace": ns}, "spec": spec}
}

const (
	ns          = "ai"
	vfRes       = "example.com/sriov_rdma"
	sharedRes   = "rdma/hca_shared"
	vfPF        = "ens1f0np0"
	sharedPF    = "ens2f0np0"
	trainNet    = "train-rdma"
	rdzvService = "train-rdzv"
)

func ipcLock() []string { return []string{"IPC_LOCK"} }

// exclusiveWL is a clean exclusive-mode Job (the seed layout, with IPC_LOCK).
func exclusiveWL() wlB {
	return wlB{
		name: "train", ns: ns, indexed: true, subdomain: rdzvService,
		labels: map[string]string{"app": "train"},
		ann:    map[string]string{manifest.NetworksAnnotation: `[{"name": "train-rdma", "interface": "net1"}]`},
		ctrs: []ctrB{{
			name: "trainer",
			env: [][2]string{
				{"MASTER_ADDR", "train-0.train-rdzv.ai.svc.cluster.local"},
				{"MASTER_PORT", "29500"},
				{"NCCL_SOCKET_IFNAME", "=net1"},
			},
			limits:   M{"nvidia.com/gpu": "8", vfRes: "1"},
			requests: M{"nvidia.com/gpu": "8", vfRes: "1"},
			caps:     ipcLock(),
		}},
	}
}

func exclusiveNAD() M {
	return nadObj(trainNet, ns, vfRes, conflist(trainNet, sriovPlugin(), M{"type": "rdma"}))
}

func vfPool() M { return sriovPoolCM("example.com", "sriov_rdma", []string{vfPF}, true) }

func rdzv() M { return serviceObj(rdzvService, ns, map[string]string{"app": "train"}, true) }

// exclusiveSet is a clean exclusive-mode input.
func exclusiveSet(w wlB) []M { return []M{vfPool(), exclusiveNAD(), rdzv(), w.obj()} }

func sharedWL() wlB {
	w := exclusiveWL()
	w.ann = map[string]string{manifest.NetworksAnnotation: "shared-rdma@net1"}
	w.ctrs[0].limits = M{"nvidia.com/gpu": "8", sharedRes: "1"}
	w.ctrs[0].requests = nil
	return w
}

func sharedNAD() M {
	return nadObj("shared-rdma", ns, sharedRes, conflist("shared-rdma", macvlanPlugin(sharedPF)))
}

func sharedPool() M { return sharedPoolCM("hca_shared", []string{sharedPF}, 63) }

func sharedSet(w wlB) []M { return []M{sharedPool(), sharedNAD(), rdzv(), w.obj()} }

func hostWL() wlB {
	return wlB{
		name: "train", ns: ns, hostNetwork: true, dnsPolicy: "ClusterFirstWithHostNet", indexed: true, subdomain: rdzvService,
		labels: map[string]string{"app": "train"},
		ann:    map[string]string{NodeExclusiveAnnotation: "true"},
		ctrs: []ctrB{{
			name: "trainer",
			env: [][2]string{
				{"MASTER_ADDR", "train-0.train-rdzv"},
				{"MASTER_PORT", "29500"},
				{"NCCL_SOCKET_IFNAME", "=" + sharedPF},
				{"NCCL_IB_DISABLE", "0"},
			},
			limits: M{"nvidia.com/gpu": "8", sharedRes: "1"},
			caps:   ipcLock(),
		}},
	}
}

func hostSet(w wlB) []M { return []M{sharedPool(), rdzv(), w.obj()} }

func yamlOf(t testing.TB, docs []M) string {
	t.Helper()
	var parts []string
	for _, d := range docs {
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, string(b))
	}
	return strings.Join(parts, "\n---\n")
}

func lintDocs(t testing.TB, docs []M) *Result {
	t.Helper()
	objs, err := manifest.Parse("test.yaml", []byte(yamlOf(t, docs)))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	res, err := Lint(objs)
	if err != nil {
		t.Fatalf("lint: %v", err)
	}
	return res
}

func i64(v int64) *int64 { return &v }

// --- DRA ---

const (
	draTemplate = "train-devices"
	vfClass     = "train-vf.example.com"
	gpuClass    = "gpu.nvidia.com"
)

func deviceClassObj(name, expr string) M {
	return M{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": M{"name": name},
		"spec": M{"selectors": []any{M{"cel": M{"expression": expr}}}}}
}

// poolClassCEL selects kind devices of rdmanet's driver in pool resource.
func poolClassCEL(kind, resource string) string {
	return `device.driver == "rdma.rdmanet.io" && device.attributes["rdma.rdmanet.io"].kind == "` + kind + `" && device.attributes["k8s.cni.cncf.io"].resourceName == "` + resource + `"`
}

func vfClassObj() M { return deviceClassObj(vfClass, poolClassCEL("exclusive", vfRes)) }

// dreq is one exactly request; count > 1 sets ExactCount.
func dreq(name, class string, count int) M {
	e := M{"deviceClassName": class}
	if count > 1 {
		e["allocationMode"], e["count"] = "ExactCount", count
	}
	return M{"name": name, "exactly": e}
}

func pcieCon(reqs ...string) M {
	return M{"requests": reqs, "matchAttribute": "resource.kubernetes.io/pcieRoot"}
}

func claimTmpl(name string, reqs []M, cons []M) M {
	rs := make([]any, len(reqs))
	for i, r := range reqs {
		rs[i] = r
	}
	dev := M{"requests": rs}
	if cons != nil {
		cs := make([]any, len(cons))
		for i, c := range cons {
			cs[i] = c
		}
		dev["constraints"] = cs
	}
	return M{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": M{"name": name, "namespace": ns},
		"spec": M{"spec": M{"devices": dev}}}
}

// alignedTmpl: one GPU+NIC pair of the VF pool's class, aligned.
func alignedTmpl() M {
	return claimTmpl(draTemplate, []M{dreq("gpu-0", gpuClass, 1), dreq("nic-0", vfClass, 1)}, []M{pcieCon("gpu-0", "nic-0")})
}

// draWL is exclusiveWL taking its GPU and VF from the claim template.
func draWL() wlB {
	w := exclusiveWL()
	w.antiAffinity = true
	w.podClaims = []any{M{"name": "devices", "resourceClaimTemplateName": draTemplate}}
	w.ctrs[0].limits, w.ctrs[0].requests = nil, nil
	w.ctrs[0].claims = []string{"devices"}
	return w
}

// draSet is a clean exclusive DRA input: pool, pool class, NAD, template, Service, Job.
func draSet(w wlB, tmpl M) []M {
	return []M{vfPool(), vfClassObj(), exclusiveNAD(), tmpl, rdzv(), w.obj()}
}
