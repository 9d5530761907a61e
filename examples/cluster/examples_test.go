// Tests of the runnable examples for the cluster tier's node: every file is
// its source (a verbatim seed, or the simulated node's demo for the shared
// mode the seeds leave without a workload) changed only where the node
// cannot run it, and the pools and resources fit together.
package cluster_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/agent"
	"github.com/rdmanet/rdmanet/internal/deviceplugin/config"
	"github.com/rdmanet/rdmanet/internal/manifest"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
	"github.com/rdmanet/rdmanet/test/cluster/fakegpu"
	"github.com/rdmanet/rdmanet/test/seeds"
)

// What a runnable variant sets in every container.
const (
	testImage      = "localhost/testbox:latest"
	testPullPolicy = "Never"
)

// variants maps each runnable file to the file it is a variant of.
var variants = []struct {
	name, file, source string
}{
	{"exclusive NAD", "exclusive/nad.yaml", "../seeds/exclusive/nad.yaml"},
	{"exclusive Service and Job", "exclusive/job.yaml", "../seeds/exclusive/job.yaml"},
	{"hostNetwork Pod", "hostnetwork/pod.yaml", "../seeds/hostnetwork/pod.yaml"},
	{"hostNetwork Service", "hostnetwork/service.yaml", "../seeds/hostnetwork/service.yaml"},
	{"shared Job", "shared/job.yaml", "../../internal/sim/manifests/shared-job.yaml"},
}

// own are the files with no source to differ from: checked by their own tests.
var own = map[string]string{
	"namespace.yaml":  "TestNamespace",
	"shared/nad.yaml": "TestSharedNADIsTheSeedMacvlanNetwork",
	"pools.json":      "TestPools",
}

// allowed are the only paths where a variant may differ from its source:
// a container's image, pull policy, command and args (in a Pod or a template).
var allowed = regexp.MustCompile(`^\$(\.spec\.template)?\.spec\.(initContainers|containers)\[\d+\]\.(image|imagePullPolicy|command|args)$`)

// diff lists the JSON paths where got differs from want, except the allowed
// ones (below which it does not look).
func diff(path string, want, got any) []string {
	if allowed.MatchString(path) {
		return nil
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{path}
		}
		keys := map[string]bool{}
		for k := range w {
			keys[k] = true
		}
		for k := range g {
			keys[k] = true
		}
		var out []string
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			p := path + "." + k
			wv, wok := w[k]
			gv, gok := g[k]
			if wok != gok {
				if !allowed.MatchString(p) {
					out = append(out, p)
				}
				continue
			}
			out = append(out, diff(p, wv, gv)...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{path}
		}
		var out []string
		for i := range w {
			out = append(out, diff(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return out
	default:
		if !reflect.DeepEqual(want, got) {
			return []string{path}
		}
		return nil
	}
}

// diffFiles compares two manifest files object by object.
func diffFiles(t *testing.T, sourcePath, variantPath string) []string {
	t.Helper()
	src, err := manifest.ParseFile(sourcePath)
	if err != nil {
		t.Fatal(err)
	}
	vr, err := manifest.ParseFile(variantPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(src) != len(vr) {
		return []string{fmt.Sprintf("%d objects, the source has %d", len(vr), len(src))}
	}
	var out []string
	for i := range src {
		for _, p := range diff("$", src[i].Data, vr[i].Data) {
			out = append(out, src[i].Ref()+" "+p)
		}
	}
	return out
}

func TestVariantsDifferOnlyInImageAndCommand(t *testing.T) {
	for _, tc := range variants {
		t.Run(tc.name, func(t *testing.T) {
			if d := diffFiles(t, tc.source, tc.file); len(d) > 0 {
				t.Fatalf("%s differs from %s beyond image, imagePullPolicy, command and args at:\n  %s", tc.file, tc.source, strings.Join(d, "\n  "))
			}
			objs, err := manifest.ParseFile(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				tmpls, err := manifest.PodTemplates(o)
				if err != nil {
					t.Fatal(err)
				}
				for _, tm := range tmpls {
					for i, c := range append(tm.Spec.InitContainers, tm.Spec.Containers...) {
						if c.Image != testImage || string(c.ImagePullPolicy) != testPullPolicy || len(c.Command) == 0 {
							t.Errorf("%s container %d (%s): image %q, imagePullPolicy %q, command %q; want %s, %s and a command the test image has",
								o.Ref(), i, c.Name, c.Image, c.ImagePullPolicy, c.Command, testImage, testPullPolicy)
						}
					}
				}
			}
		})
	}
}

// TestDiffReportsPaths: the checker itself finds a change anywhere but in
// the allowed fields, and names it by its JSON path.
func TestDiffReportsPaths(t *testing.T) {
	src, err := manifest.ParseFile("../seeds/exclusive/job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	job := src[1].Data
	tests := []struct {
		name   string
		change func(job map[string]any)
		want   []string
	}{
		{name: "image, pull policy, command and args are allowed", change: func(j map[string]any) {
			c := container(j)
			c["image"], c["imagePullPolicy"], c["command"], c["args"] = testImage, testPullPolicy, []any{"sleep"}, []any{"infinity"}
		}},
		{name: "env value", change: func(j map[string]any) {
			container(j)["env"].([]any)[2].(map[string]any)["value"] = "=eth0"
		}, want: []string{"$.spec.template.spec.containers[0].env[2].value"}},
		{name: "resource removed", change: func(j map[string]any) {
			delete(container(j)["resources"].(map[string]any)["limits"].(map[string]any), "nvidia.com/gpu")
		}, want: []string{"$.spec.template.spec.containers[0].resources.limits.nvidia.com/gpu"}},
		{name: "securityContext added", change: func(j map[string]any) {
			container(j)["securityContext"] = map[string]any{"privileged": true}
		}, want: []string{"$.spec.template.spec.containers[0].securityContext"}},
		{name: "annotation and namespace", change: func(j map[string]any) {
			j["metadata"].(map[string]any)["namespace"] = "default"
			j["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)["annotations"] = map[string]any{}
		}, want: []string{"$.metadata.namespace", "$.spec.template.metadata.annotations.k8s.v1.cni.cncf.io/networks"}},
		{name: "container added", change: func(j map[string]any) {
			spec := j["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
			spec["containers"] = append(spec["containers"].([]any), map[string]any{"name": "sidecar"})
		}, want: []string{"$.spec.template.spec.containers"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var changed map[string]any
			b, _ := json.Marshal(job)
			if err := json.Unmarshal(b, &changed); err != nil {
				t.Fatal(err)
			}
			tc.change(changed)
			if got := diff("$", job, changed); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("diff = %q, want %q", got, tc.want)
			}
		})
	}
}

func container(job map[string]any) map[string]any {
	spec := job["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	return spec["containers"].([]any)[0].(map[string]any)
}

// TestEveryFileIsChecked: a file added here must be a variant with a source
// or have a test of its own.
func TestEveryFileIsChecked(t *testing.T) {
	known := map[string]bool{}
	for _, v := range variants {
		known[v.file] = true
	}
	for f := range own {
		known[f] = true
	}
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch filepath.Ext(p) {
		case ".yaml", ".yml", ".json":
			if !known[filepath.ToSlash(p)] {
				t.Errorf("%s: neither a variant of a seed (add it to variants) nor checked by a test of its own (add it to own)", p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestNamespace(t *testing.T) {
	objs, err := manifest.ParseFile("namespace.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].Kind != "Namespace" || objs[0].Name != "ai-training" {
		t.Fatalf("namespace.yaml: %v, want the one Namespace ai-training", objs)
	}
	// every namespaced example object lives there or in the default namespace
	for _, v := range variants {
		objs, err := manifest.ParseFile(v.file)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if o.Namespace != "" && o.Namespace != "ai-training" {
				t.Errorf("%s: %s is in namespace %q, which nothing here creates", v.file, o.Ref(), o.Namespace)
			}
		}
	}
}

// TestSharedNADIsTheSeedMacvlanNetwork: shared/nad.yaml is the NAD the
// Network Operator generates from the seed's MacvlanNetwork (master, mode,
// mtu, IPAM), with one addition: ipam.exclude.
func TestSharedNADIsTheSeedMacvlanNetwork(t *testing.T) {
	seedObjs, err := manifest.ParseFile(filepath.Join(seeds.Dir(), "shared-nvidia-network-operator", "nicclusterpolicy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var mv *manifest.Object
	for _, o := range seedObjs {
		if o.Kind == "MacvlanNetwork" {
			mv = o
		}
	}
	if mv == nil {
		t.Fatal("seed has no MacvlanNetwork")
	}
	var seedIPAM map[string]any
	if err := json.Unmarshal([]byte(manifest.GetString(mv.Data, "spec.ipam")), &seedIPAM); err != nil {
		t.Fatalf("seed MacvlanNetwork ipam: %v", err)
	}
	want := map[string]any{
		"cniVersion": "0.3.1", // what the operator writes
		"name":       mv.Name,
		"type":       "macvlan",
		"master":     manifest.GetAny(mv.Data, "spec.master"),
		"mode":       manifest.GetAny(mv.Data, "spec.mode"),
		"mtu":        manifest.GetAny(mv.Data, "spec.mtu"),
		"ipam":       seedIPAM,
	}
	objs, err := manifest.ParseFile("shared/nad.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].Kind != "NetworkAttachmentDefinition" || objs[0].Name != mv.Name {
		t.Fatalf("shared/nad.yaml: want one NetworkAttachmentDefinition %s", mv.Name)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(manifest.GetString(objs[0].Data, "spec.config")), &got); err != nil {
		t.Fatalf("shared/nad.yaml spec.config: %v", err)
	}
	ipam, _ := got["ipam"].(map[string]any)
	if ex, _ := ipam["exclude"].([]any); !reflect.DeepEqual(ex, []any{"192.168.2.0/28"}) {
		t.Errorf("ipam.exclude = %v, want [192.168.2.0/28] (the node's own addresses)", ipam["exclude"])
	}
	delete(ipam, "exclude")
	if d := diff("$", want, got); len(d) > 0 {
		t.Fatalf("shared/nad.yaml's config differs from the seed's MacvlanNetwork at %q", d)
	}
	if len(objs[0].Annotations) > 0 {
		t.Errorf("shared/nad.yaml has annotations %v; the generated NAD has none", objs[0].Annotations)
	}
	if objs[0].Namespace != "ai-training" {
		t.Errorf("shared/nad.yaml is in %q, want the shared Job's namespace ai-training", objs[0].Namespace)
	}
	if !strings.Contains(strings.Join(annotationsOf(t, "shared/job.yaml"), " "), `"name": "rdmashared-net"`) {
		t.Errorf("shared/job.yaml does not attach rdmashared-net")
	}
}

func annotationsOf(t *testing.T, file string) []string {
	t.Helper()
	objs, err := manifest.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		tmpls, err := manifest.PodTemplates(o)
		if err != nil {
			t.Fatal(err)
		}
		for _, tm := range tmpls {
			out = append(out, tm.Meta.Annotations[manifest.NetworksAnnotation])
		}
	}
	return out
}

// poolLists is the JSON of a pool config's two lists.
type poolLists struct {
	ResourceList []any `json:"resourceList"`
	ConfigList   []any `json:"configList"`
}

// TestPools: pools.json holds the seeds' pools verbatim — the sriovdp
// ConfigMap's resourceList and the NicClusterPolicy's configList — and on
// the fixture node the agent advertises both, with the devices the examples
// request, when the RDMA netns mode is not stated (the machine's kernel has
// no RDMA subsystem to report it).
func TestPools(t *testing.T) {
	b, err := os.ReadFile("pools.json")
	if err != nil {
		t.Fatal(err)
	}
	var got poolLists
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	// seedList reads the pool JSON that get finds in the seed file's first object.
	seedList := func(file string, get func(o *manifest.Object) string) poolLists {
		objs, err := manifest.ParseFile(filepath.Join(seeds.Dir(), file))
		if err != nil {
			t.Fatal(err)
		}
		var out poolLists
		if err := json.Unmarshal([]byte(get(objs[0])), &out); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		return out
	}
	// the ConfigMap's key has a dot, which manifest.Get would split at
	configJSON := func(o *manifest.Object) string {
		data, _ := o.Data["data"].(map[string]any)
		s, _ := data["config.json"].(string)
		return s
	}
	sharedConfig := func(o *manifest.Object) string {
		return manifest.GetString(o.Data, "spec.rdmaSharedDevicePlugin.config")
	}
	if want := seedList("exclusive/sriovdp-config.yaml", configJSON).ResourceList; !reflect.DeepEqual(got.ResourceList, want) {
		t.Errorf("resourceList = %v, want the seed's %v", got.ResourceList, want)
	}
	if want := seedList("shared-nvidia-network-operator/nicclusterpolicy.yaml", sharedConfig).ConfigList; !reflect.DeepEqual(got.ConfigList, want) {
		t.Errorf("configList = %v, want the seed's %v", got.ConfigList, want)
	}

	specs, err := config.Parse("pools.json", b)
	if err != nil {
		t.Fatal(err)
	}
	node, err := sysfsfixture.NewStandard(filepath.Join(t.TempDir(), "sys"), sysfsfixture.StandardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		netnsMode string
		want      map[string]int // advertised resource -> devices
	}{
		{name: "netns mode unknown: both pools", want: map[string]int{"example.com/sriov_rdma": 16, "rdma/rdma_shared_device_eth": 63}},
		{name: "--rdma-netns-mode=exclusive: no shared pool", netnsMode: "exclusive", want: map[string]int{"example.com/sriov_rdma": 16}},
		{name: "--rdma-netns-mode=shared: no VF pool", netnsMode: "shared", want: map[string]int{"rdma/rdma_shared_device_eth": 63}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			snap, err := agent.Discover(agent.Options{SysfsRoot: node.Root, NetnsModeFlag: tc.netnsMode}, specs)
			if err != nil {
				t.Fatal(err)
			}
			advertised := map[string]int{}
			for _, p := range snap.Pools {
				if p.Advertised {
					advertised[p.Resource] = len(p.Devices)
				}
			}
			if !reflect.DeepEqual(advertised, tc.want) {
				t.Fatalf("advertised %v, want %v", advertised, tc.want)
			}
		})
	}
}

// TestOverlayPoolsAreThese: the cluster overlay carries its own copy of
// pools.json (kustomize loads files only from inside the overlay); the two
// must not drift apart.
func TestOverlayPoolsAreThese(t *testing.T) {
	const overlay = "../../test/cluster/overlay/pools.json"
	read := func(p string) any {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		return v
	}
	if _, err := os.Stat(overlay); err != nil {
		t.Skipf("no cluster overlay in this tree: %v", err)
	}
	if d := diff("$", read("pools.json"), read(overlay)); len(d) > 0 {
		t.Fatalf("%s differs from examples/cluster/pools.json at %q", overlay, d)
	}
}

// TestRequestedResourcesAreServed: every extended resource the examples
// request comes from pools.json or the fake GPU plugin, and every NAD's
// resourceName annotation names a pool.
func TestRequestedResourcesAreServed(t *testing.T) {
	b, err := os.ReadFile("pools.json")
	if err != nil {
		t.Fatal(err)
	}
	specs, err := config.Parse("pools.json", b)
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{fakegpu.DefaultResource: true}
	for _, s := range specs {
		served[s.Resource()] = true
	}
	files := []string{"shared/nad.yaml"}
	for _, v := range variants {
		files = append(files, v.file)
	}
	for _, f := range files {
		objs, err := manifest.ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if r := o.Annotations[manifest.ResourceNameAnnotation]; r != "" && !served[r] {
				t.Errorf("%s: %s names resource %s, which no pool serves", f, o.Ref(), r)
			}
			tmpls, err := manifest.PodTemplates(o)
			if err != nil {
				t.Fatal(err)
			}
			for _, tm := range tmpls {
				for _, c := range tm.Spec.Containers {
					for name := range c.Resources.Limits {
						if strings.Contains(string(name), "/") && !served[string(name)] {
							t.Errorf("%s: %s container %s requests %s, which nothing on the node serves", f, o.Ref(), c.Name, name)
						}
					}
				}
			}
		}
	}
}
