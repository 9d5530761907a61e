package chart

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/rdmanet/rdmanet/internal/guidpool"
	"github.com/rdmanet/rdmanet/test/apiserver"
)

func TestMain(m *testing.M) {
	code := m.Run()
	apiserver.StopShared()
	os.Exit(code)
}

func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := apiserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func chartDir(t testing.TB) string { return filepath.Join(repoRoot(t), "charts", "rdmanet") }

func render(t testing.TB, vals map[string]any) []Object {
	t.Helper()
	objs, err := Render(chartDir(t), Namespace, vals)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// chartSource is the chart file that mirrors a deploy/ file: the same path
// under templates/, components' files under templates/<component>/, the
// CRDs under crds/.
func chartSource(deploySource string) string {
	p := strings.TrimPrefix(deploySource, "deploy/")
	switch {
	case strings.HasPrefix(p, "crds/"):
		return p
	case strings.HasPrefix(p, "components/"):
		return "templates/" + strings.TrimPrefix(p, "components/")
	}
	return "templates/" + p
}

// TestChartMatchesDeploy: the chart renders exactly the objects of
// `kustomize build` of deploy/ (and of an overlay with each component),
// object by object, each from the template that mirrors its deploy/ file.
// A change to deploy/ fails here until charts/rdmanet follows it.
func TestChartMatchesDeploy(t *testing.T) {
	root := repoRoot(t)
	deploy := filepath.Join(root, "deploy")
	for _, tc := range []struct {
		name       string
		vals       string
		components []string
	}{
		{name: "default values = deploy/"},
		{name: "dra.enabled = deploy/ + components/dra", vals: "dra: {enabled: true}", components: []string{"dra"}},
		{name: "monitoring.enabled = deploy/ + components/monitoring", vals: "monitoring: {enabled: true}", components: []string{"monitoring"}},
		{name: "policyAudit.enabled = deploy/ + components/policy-audit", vals: "policyAudit: {enabled: true}", components: []string{"policy-audit"}},
		{name: "infiniband.guidPool.ranges = deploy/ + components/infiniband", vals: guidPoolValues, components: []string{"infiniband"}},
		{name: "every component", vals: "dra: {enabled: true}\nmonitoring: {enabled: true}\npolicyAudit: {enabled: true}\n" + guidPoolValues, components: []string{"dra", "monitoring", "policy-audit", "infiniband"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var comps []string
			for _, c := range tc.components {
				comps = append(comps, filepath.Join(deploy, "components", c))
			}
			want, err := Kustomize(root, deploy, comps...)
			if err != nil {
				t.Fatal(err)
			}
			got := render(t, values(t, tc.vals))
			if d := Diff("deploy/", want, "the chart", got); len(d) > 0 {
				t.Fatalf("charts/rdmanet no longer renders deploy/ (update the chart template that mirrors the deploy/ file; internal/chart/doc.go):\n%s", strings.Join(d, "\n"))
			}
			bySource := map[string]string{}
			for _, o := range got {
				bySource[o.Key()] = o.Source
			}
			for _, o := range want {
				// a patch of a component lands in the object's own template
				if src, want := bySource[o.Key()], chartSource(o.Source); src != want {
					t.Errorf("%s: from %s, want it from %s (the chart mirrors deploy/ file by file)", o, src, want)
				}
			}
		})
	}
}

// guidPoolValues switch the InfiniBand GUID pool on with the range of
// deploy/components/infiniband/guid-pool.yaml.
const guidPoolValues = `infiniband: {guidPool: {ranges: [{start: "02:00:00:00:00:00:00:01", end: "02:00:00:00:00:00:ff:ff"}]}}`

// TestChartCRDsVerbatim: the chart's crds/ are deploy/crds byte for byte
// (Helm installs them unrendered).
func TestChartCRDsVerbatim(t *testing.T) {
	root := repoRoot(t)
	files, _ := filepath.Glob(filepath.Join(root, "deploy", "crds", "*.yaml"))
	chartFiles, _ := filepath.Glob(filepath.Join(chartDir(t), "crds", "*.yaml"))
	if len(files) == 0 || len(files) != len(chartFiles) {
		t.Fatalf("deploy/crds has %d files, charts/rdmanet/crds %d", len(files), len(chartFiles))
	}
	for _, f := range files {
		a, _ := os.ReadFile(f)
		b, err := os.ReadFile(filepath.Join(chartDir(t), "crds", filepath.Base(f)))
		if err != nil || string(a) != string(b) {
			t.Errorf("charts/rdmanet/crds/%s differs from deploy/crds (%v): cp deploy/crds/*.yaml charts/rdmanet/crds/", filepath.Base(f), err)
		}
	}
}

// TestChartVersion: the chart's version and appVersion are VERSION.
func TestChartVersion(t *testing.T) {
	v, err := os.ReadFile(filepath.Join(repoRoot(t), "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Load(chartDir(t))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSpace(string(v))
	if c.Metadata.Version != want || c.Metadata.AppVersion != want {
		t.Fatalf("Chart.yaml version %q appVersion %q, VERSION %q: set both to VERSION", c.Metadata.Version, c.Metadata.AppVersion, want)
	}
}

func values(t testing.TB, y string) map[string]any {
	t.Helper()
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(y), &m); err != nil {
		t.Fatalf("values %q: %v", y, err)
	}
	return m
}

func find(t testing.TB, objs []Object, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o.Unstructured
		}
	}
	return nil
}

func containers(t testing.TB, u *unstructured.Unstructured) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, f := range []string{"initContainers", "containers"} {
		l, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", f)
		for _, c := range l {
			out = append(out, c.(map[string]any))
		}
	}
	return out
}

// TestChartValues: what operators change, table by table.
func TestChartValues(t *testing.T) {
	const deviceplugin = `{"resourceList":[{"resourceName":"mlnx_sriov_rdma","resourcePrefix":"nvidia.com","selectors":{"vendors":["15b3"],"devices":["101e"],"drivers":["mlx5_core"],"isRdma":true}}]}`
	for _, tc := range []struct {
		name  string
		vals  string
		check func(t *testing.T, objs []Object)
	}{
		{"image repository and tag", "image: {repository: registry.example/rdmanet/rdmanet, tag: 1.2.3, pullPolicy: Always}", func(t *testing.T, objs []Object) {
			for _, n := range []string{"rdmanet-node", "rdmanet-controller"} {
				kind := map[string]string{"rdmanet-node": "DaemonSet", "rdmanet-controller": "Deployment"}[n]
				for _, c := range containers(t, find(t, objs, kind, n)) {
					if c["image"] != "registry.example/rdmanet/rdmanet:1.2.3" || c["imagePullPolicy"] != "Always" {
						t.Errorf("%s container %s: image %v pullPolicy %v", n, c["name"], c["image"], c["imagePullPolicy"])
					}
				}
			}
		}},
		{"image digest wins over the tag", "image: {digest: 'sha256:" + strings.Repeat("ab", 32) + "', tag: 9.9.9}", func(t *testing.T, objs []Object) {
			for _, c := range containers(t, find(t, objs, "DaemonSet", "rdmanet-node")) {
				if c["image"] != "rdmanet/rdmanet@sha256:"+strings.Repeat("ab", 32) {
					t.Errorf("container %s: image %v", c["name"], c["image"])
				}
			}
		}},
		{"pool config as the device plugin's config.json text, verbatim", "node: {agent: {configJSON: '" + deviceplugin + "'}}", func(t *testing.T, objs []Object) {
			got, _, _ := unstructured.NestedString(find(t, objs, "ConfigMap", "rdmanet-agent-config").Object, "data", "config.json")
			if strings.TrimSpace(got) != deviceplugin {
				t.Errorf("config.json %q, want the text given", got)
			}
		}},
		{"pool config in the shared device plugin's format, as YAML", "node: {agent: {config: {configList: [{resourceName: hca_shared, rdmaHcaMax: 100, selectors: {vendors: ['15b3'], ifNames: [ens1f0]}}]}}}", func(t *testing.T, objs []Object) {
			got, _, _ := unstructured.NestedString(find(t, objs, "ConfigMap", "rdmanet-agent-config").Object, "data", "config.json")
			var m map[string]any
			if err := yaml.Unmarshal([]byte(got), &m); err != nil {
				t.Fatal(err)
			}
			l := m["configList"].([]any)[0].(map[string]any)
			if l["resourceName"] != "hca_shared" || l["rdmaHcaMax"] != float64(100) || !strings.Contains(got, `"rdmaHcaMax": 100`) {
				t.Errorf("config.json %s", got)
			}
		}},
		{"default network of the meta CNI", "node: {cni: {clusterNetwork: cbr0, multusNamespace: networks}}", func(t *testing.T, objs []Object) {
			got, _, _ := unstructured.NestedString(find(t, objs, "ConfigMap", "rdmanet-node-config").Object, "data", "00-rdmanet.conf")
			if !strings.Contains(got, `"clusterNetwork": "cbr0"`) || !strings.Contains(got, `"multusNamespace": "networks"`) {
				t.Errorf("00-rdmanet.conf %s", got)
			}
		}},
		{"node selector, tolerations, resources", "node: {nodeSelector: {rdma: 'yes'}, tolerations: [{key: gpu, operator: Exists}], agent: {resources: {limits: {memory: 1Gi}}}}\ncontroller: {nodeSelector: {infra: 'true'}, replicas: 3, resources: {requests: {cpu: 1}}}", func(t *testing.T, objs []Object) {
			ds := find(t, objs, "DaemonSet", "rdmanet-node")
			sel, _, _ := unstructured.NestedStringMap(ds.Object, "spec", "template", "spec", "nodeSelector")
			tol, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "tolerations")
			// maps merge with the defaults (Helm's rule; null removes a key), lists replace them
			if len(sel) != 2 || sel["rdma"] != "yes" || sel["kubernetes.io/os"] != "linux" || len(tol) != 1 {
				t.Errorf("DaemonSet nodeSelector %v tolerations %v", sel, tol)
			}
			for _, c := range containers(t, ds) {
				if c["name"] == "rdmanet-agent" {
					if r := c["resources"].(map[string]any); r["limits"].(map[string]any)["memory"] != "1Gi" || r["requests"].(map[string]any)["cpu"] != "20m" {
						t.Errorf("agent resources %v", r)
					}
				}
			}
			d := find(t, objs, "Deployment", "rdmanet-controller")
			n, _, _ := unstructured.NestedFieldNoCopy(d.Object, "spec", "replicas")
			sel, _, _ = unstructured.NestedStringMap(d.Object, "spec", "template", "spec", "nodeSelector")
			if n != float64(3) || sel["infra"] != "true" {
				t.Errorf("Deployment replicas %d nodeSelector %v", n, sel)
			}
		}},
		{"node extras appended after the chart's own: host sysfs, args, env, mounts, volumes", `node:
  hostSysfs: /var/lib/sim/sys
  extraVolumes: [{name: sim, hostPath: {path: /var/lib/sim}}]
  agent: {extraArgs: [--rdma-netns-mode=shared], extraEnv: [{name: A, value: "1"}], extraVolumeMounts: [{name: sim, mountPath: /sim}]}
  daemon: {extraArgs: [--log-level=debug], extraEnv: [{name: D, value: "2"}], extraVolumeMounts: [{name: sim, mountPath: /sim, readOnly: true}]}`, func(t *testing.T, objs []Object) {
			ds := find(t, objs, "DaemonSet", "rdmanet-node")
			vols, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "volumes")
			var sys, sim map[string]any
			for _, v := range vols {
				switch m := v.(map[string]any); m["name"] {
				case "sys":
					sys = m
				case "sim":
					sim = m
				}
			}
			if p, _, _ := unstructured.NestedString(sys, "hostPath", "path"); p != "/var/lib/sim/sys" {
				t.Errorf("volume sys %v, want hostPath /var/lib/sim/sys", sys)
			}
			if vols[len(vols)-1].(map[string]any)["name"] != "sim" || sim == nil {
				t.Errorf("volumes %v: want the extra volume last", vols)
			}
			want := map[string][3]string{ // container: last arg, last env name, last mount path
				"rdmanet-agent":  {"--rdma-netns-mode=shared", "A", "/sim"},
				"rdmanet-daemon": {"--log-level=debug", "D", "/sim"},
			}
			for _, c := range containers(t, ds) {
				w, ok := want[c["name"].(string)]
				if !ok {
					continue
				}
				delete(want, c["name"].(string))
				args, env, mounts := c["args"].([]any), c["env"].([]any), c["volumeMounts"].([]any)
				if args[len(args)-1] != w[0] || env[len(env)-1].(map[string]any)["name"] != w[1] || mounts[len(mounts)-1].(map[string]any)["mountPath"] != w[2] {
					t.Errorf("container %s: last arg %v, env %v, mount %v; want %v appended", c["name"], args[len(args)-1], env[len(env)-1], mounts[len(mounts)-1], w)
				}
				if len(args) < 2 || len(env) < 2 {
					t.Errorf("container %s: the chart's own args/env replaced: %v %v", c["name"], args, env)
				}
			}
			if len(want) != 0 {
				t.Errorf("containers not found: %v", want)
			}
		}},
		{"InfiniBand GUID pool off by default: no ConfigMap, mount, variable or controller flag", "", func(t *testing.T, objs []Object) {
			if find(t, objs, "ConfigMap", "rdmanet-guid-pool") != nil {
				t.Error("ConfigMap rdmanet-guid-pool rendered with infiniband.guidPool.ranges empty")
			}
			for _, o := range []*unstructured.Unstructured{find(t, objs, "DaemonSet", "rdmanet-node"), find(t, objs, "Deployment", "rdmanet-controller")} {
				if b, _ := o.MarshalJSON(); strings.Contains(string(b), "guid-pool") || strings.Contains(string(b), "GUID_POOL") {
					t.Errorf("%s %s mentions the GUID pool with it off", o.GetKind(), o.GetName())
				}
			}
		}},
		{"InfiniBand GUID pool: ranges, name, block size and hook into guid-pool.json, mounted in the daemon and the controller", `infiniband:
  guidPool:
    name: fabric-a
    blockSize: 16
    ranges:
      - {start: "02:00:00:00:00:00:00:01", end: "02:00:00:00:00:00:0f:ff"}
      - {start: "02:00:00:00:00:01:00:00", end: "02:00:00:00:00:01:ff:ff"}
    hook: [/opt/sm/hook, --fabric, a]
    hookTimeout: 10s`, func(t *testing.T, objs []Object) {
			cm := find(t, objs, "ConfigMap", "rdmanet-guid-pool")
			if cm == nil {
				t.Fatal("no ConfigMap rdmanet-guid-pool")
			}
			text, _, _ := unstructured.NestedString(cm.Object, "data", "guid-pool.json")
			// the nodes' own parser (ib-sriov's) and the controller's accept it
			cfg, err := guidpool.Parse("guid-pool.json", []byte(text))
			if err != nil {
				t.Fatalf("guid-pool.json %s: %v", text, err)
			}
			if len(cfg.Warnings) > 0 {
				t.Errorf("guid-pool.json warnings: %v", cfg.Warnings)
			}
			if cfg.Network != "infiniband-guid/fabric-a" || len(cfg.Ranges) != 2 || cfg.Ranges[1].First.String() != "02:00:00:00:00:01:00:00" ||
				!slices.Equal(cfg.Hook, []string{"/opt/sm/hook", "--fabric", "a"}) || cfg.HookTimeout != 10*time.Second ||
				cfg.Store.Type != "kubernetes" || cfg.Store.Kubeconfig != "/etc/cni/net.d/rdmanet-ipam.d/rdmanet-ipam.kubeconfig" {
				t.Errorf("guid-pool.json parsed as %+v:\n%s", cfg, text)
			}
			if !strings.Contains(text, `"blockSize": 16`) {
				t.Errorf("guid-pool.json lacks the block size:\n%s", text)
			}
			const dir, file = "/etc/rdmanet/guid-pool", "/etc/rdmanet/guid-pool/guid-pool.json"
			mounted := func(c map[string]any) bool {
				for _, m := range c["volumeMounts"].([]any) {
					if m := m.(map[string]any); m["name"] == "guid-pool" && m["mountPath"] == dir && m["readOnly"] == true {
						return true
					}
				}
				return false
			}
			volume := func(u *unstructured.Unstructured) bool {
				vols, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "volumes")
				for _, v := range vols {
					if n, _, _ := unstructured.NestedString(v.(map[string]any), "configMap", "name"); n == "rdmanet-guid-pool" {
						return true
					}
				}
				return false
			}
			ds := find(t, objs, "DaemonSet", "rdmanet-node")
			for _, c := range containers(t, ds) {
				if c["name"] != "rdmanet-daemon" {
					continue
				}
				var env string
				for _, e := range c["env"].([]any) {
					if e := e.(map[string]any); e["name"] == "RDMANET_GUID_POOL_CONFIG" {
						env, _ = e["value"].(string)
					}
				}
				if env != file || !mounted(c) {
					t.Errorf("rdmanet-daemon: RDMANET_GUID_POOL_CONFIG=%q, mounted %v; want %s from the ConfigMap at %s", env, mounted(c), file, dir)
				}
			}
			if !volume(ds) {
				t.Error("DaemonSet has no volume of ConfigMap rdmanet-guid-pool")
			}
			d := find(t, objs, "Deployment", "rdmanet-controller")
			c := containers(t, d)[0]
			if !slices.Contains(c["args"].([]any), any("--guid-pool-config="+file)) || !mounted(c) || !volume(d) {
				t.Errorf("controller args %v, mounted %v, volume %v; want --guid-pool-config=%s from the ConfigMap", c["args"], mounted(c), volume(d), file)
			}
		}},
		{"webhooks off", "webhooks: {enabled: false}", func(t *testing.T, objs []Object) {
			if find(t, objs, "MutatingWebhookConfiguration", "rdmanet-controller") != nil || find(t, objs, "Service", "rdmanet-controller") != nil {
				t.Error("webhook configuration or Service rendered with webhooks.enabled=false")
			}
			args, _, _ := unstructured.NestedSlice(containers(t, find(t, objs, "Deployment", "rdmanet-controller"))[0], "args")
			if !slices.Contains(args, any("--webhooks=false")) {
				t.Errorf("controller args %v, want --webhooks=false", args)
			}
		}},
		{"controller and webhooks off", "controller: {enabled: false}\nwebhooks: {enabled: false}", func(t *testing.T, objs []Object) {
			for _, o := range objs {
				if strings.Contains(o.Source, "controller/") {
					t.Errorf("%s rendered with controller.enabled=false", o)
				}
			}
			if find(t, objs, "DaemonSet", "rdmanet-node") == nil {
				t.Error("no node DaemonSet")
			}
		}},
		{"node off", "node: {enabled: false}\nnamespace: {create: false}", func(t *testing.T, objs []Object) {
			for _, o := range objs {
				if !strings.HasPrefix(o.Source, "templates/controller/") && !strings.HasPrefix(o.Source, "crds/") {
					t.Errorf("%s rendered with node.enabled=false and namespace.create=false", o)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(t, render(t, values(t, tc.vals)))
		})
	}
}

// TestChartRefuses: values that could only fail later fail the render,
// naming the value and the fix.
func TestChartRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, ns, vals, want string
	}{
		{"another namespace", "default", "", `rdmanet installs into the namespace rdmanet-system, not "default"`},
		{"webhooks without the controller", Namespace, "controller: {enabled: false}", "webhooks.enabled needs controller.enabled"},
		{"DRA without the node agent", Namespace, "node: {enabled: false}\ndra: {enabled: true}", "dra.enabled needs node.enabled"},
		{"policy audit without the node policies", Namespace, "node: {enabled: false}\npolicyAudit: {enabled: true}", "policyAudit.enabled needs node.enabled"},
		{"a digest that is not one", Namespace, "image: {digest: latest}", `image.digest "latest"`},
		{"a pool config that is not an object", Namespace, "node: {agent: {config: 3}}", "node.agent.config: a float64"},
		{"a pool config file that is not text", Namespace, "node: {agent: {configJSON: {a: 1}}}", "node.agent.configJSON: a map"},
		{"GUID ranges that are not a list", Namespace, "infiniband: {guidPool: {ranges: '02:00:00:00:00:00:00:01-02:00:00:00:00:00:ff:ff'}}", "infiniband.guidPool.ranges: a string"},
		{"a GUID range without its end", Namespace, "infiniband: {guidPool: {ranges: [{start: '02:00:00:00:00:00:00:01'}]}}", "infiniband.guidPool.ranges[0]"},
		{"a hook that is not an absolute path", Namespace, "infiniband: {guidPool: {ranges: [{start: '02:00:00:00:00:00:00:01', end: '02:00:00:00:00:00:00:ff'}], hook: [sm-hook.sh]}}", "infiniband.guidPool.hook"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Render(chartDir(t), tc.ns, values(t, tc.vals))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("render: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestChartLint: helm lint --strict passes for the defaults and for every
// component switched on or off.
func TestChartLint(t *testing.T) {
	for _, vals := range []string{
		"",
		"dra: {enabled: true}\nmonitoring: {enabled: true}\npolicyAudit: {enabled: true}\n" + guidPoolValues,
		"controller: {enabled: false}\nwebhooks: {enabled: false}",
		"node: {enabled: false}",
	} {
		t.Run(vals, func(t *testing.T) {
			if err := Lint(chartDir(t), values(t, vals)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestChartDryRun: the rendered chart (defaults, and with DRA) is accepted
// by a real kube-apiserver: server-side dry-run create, strict field
// validation. With monitoring the Service is (the server has no
// ServiceMonitor CRD).
func TestChartDryRun(t *testing.T) {
	api := apiserver.Shared(t)
	for _, tc := range []struct{ name, vals string }{
		{"defaults", ""},
		{"dra", "dra: {enabled: true}"},
		{"monitoring", "monitoring: {enabled: true}"},
		{"policy audit", "policyAudit: {enabled: true}"},
		{"infiniband GUID pool", guidPoolValues},
		{"values changed", "image: {repository: registry.example/r, tag: '1.0'}\nnode: {nodeSelector: {a: b}, tolerations: [{key: k, operator: Exists}]}\nwebhooks: {enabled: false}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []*unstructured.Unstructured
			for _, o := range render(t, values(t, tc.vals)) {
				if o.GetKind() == "Namespace" {
					createNamespace(t, api, o.Unstructured)
					continue
				}
				if o.GetKind() == "ServiceMonitor" {
					continue
				}
				objs = append(objs, o.Unstructured)
			}
			if err := apiserver.DryRunCreate(context.Background(), api.Config(), objs...); err != nil {
				t.Fatal(err)
			}
		})
	}
}
