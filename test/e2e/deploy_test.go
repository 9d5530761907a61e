package e2e

// Tests of the installation manifests under deploy/ (docs/deploy.md):
// every object is accepted by a real kube-apiserver (server-side dry-run,
// strict field validation), the DaemonSet's and CronJob's flags are accepted
// by the real binaries, the init container's installer script works, and
// each component's RBAC is sufficient for the API calls its code makes and
// refuses calls outside them, with a token minted for its ServiceAccount.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/rdmanet/rdmanet/api/ipam/v1alpha1"
	"github.com/rdmanet/rdmanet/internal/agent"
	"github.com/rdmanet/rdmanet/internal/cni/meta"
	"github.com/rdmanet/rdmanet/internal/cni/meta/kube"
	"github.com/rdmanet/rdmanet/internal/daemon"
	"github.com/rdmanet/rdmanet/internal/devinfo"
	"github.com/rdmanet/rdmanet/internal/inventory"
	"github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/internal/ipam/gc"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
	"github.com/rdmanet/rdmanet/test/apiserver"
	"github.com/rdmanet/rdmanet/test/pluginbin"
)

const deployNS = "rdmanet-system"

// deployObject is one YAML document of a file listed in deploy/kustomization.yaml.
type deployObject struct {
	file string
	obj  *unstructured.Unstructured
}

func (d deployObject) String() string {
	return fmt.Sprintf("%s:%s/%s", d.file, d.obj.GetKind(), d.obj.GetName())
}

func deployDir(t testing.TB) string {
	t.Helper()
	root, err := apiserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "deploy")
}

type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
	Patches    []struct {
		Target map[string]string `json:"target"`
		Patch  string            `json:"patch"`
		Path   string            `json:"path"`
	} `json:"patches"`
	Images []struct {
		Name    string `json:"name"`
		NewName string `json:"newName"`
		NewTag  string `json:"newTag"`
	} `json:"images"`
}

func readKustomization(t testing.TB) kustomization {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir(t), "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		t.Fatalf("deploy/kustomization.yaml: %v", err)
	}
	return k
}

// loadDeploy decodes every object of the kustomization, in its order.
func loadDeploy(t testing.TB) []deployObject {
	t.Helper()
	out := decodeDeploy(t, deployDir(t), readKustomization(t).Resources)
	if len(out) == 0 {
		t.Fatal("deploy/kustomization.yaml lists no objects")
	}
	return out
}

// decodeDeploy decodes the objects of files (relative to dir), in order.
func decodeDeploy(t testing.TB, dir string, files []string) []deployObject {
	t.Helper()
	var out []deployObject
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatalf("kustomization resource %s: %v", filepath.Join(dir, f), err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var m map[string]any
			if err := dec.Decode(&m); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatalf("deploy/%s: %v", f, err)
			}
			if len(m) == 0 {
				continue
			}
			out = append(out, deployObject{file: f, obj: &unstructured.Unstructured{Object: m}})
		}
	}
	return out
}

// deployTyped finds kind/name among the deploy objects and converts it to T.
func deployTyped[T any](t testing.TB, objs []deployObject, kind, name string) *T {
	t.Helper()
	for _, d := range objs {
		if d.obj.GetKind() == kind && d.obj.GetName() == name {
			out := new(T)
			if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(d.obj.Object, out, true); err != nil {
				t.Fatalf("%s: %v", d, err)
			}
			return out
		}
	}
	t.Fatalf("deploy/ has no %s %s", kind, name)
	return nil
}

func deployContainer(t testing.TB, cs []corev1.Container, name string) corev1.Container {
	t.Helper()
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %s", name)
	return corev1.Container{}
}

func deployNodeConfig(t testing.TB, objs []deployObject, key string) string {
	t.Helper()
	cm := deployTyped[corev1.ConfigMap](t, objs, "ConfigMap", "rdmanet-node-config")
	v, ok := cm.Data[key]
	if !ok {
		t.Fatalf("ConfigMap rdmanet-node-config has no key %s", key)
	}
	return v
}

// TestDeployKustomization: the kustomization lists every manifest under
// deploy/ (so the dry-run below covers all of them), and every image is the
// placeholder without a registry host, with the tag the kustomization sets.
func TestDeployKustomization(t *testing.T) {
	k := readKustomization(t)
	dir := deployDir(t)
	var onDisk []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p == filepath.Join(dir, "components") {
			return filepath.SkipDir // optional components: each lists its own files (TestDeployComponents)
		}
		if d.IsDir() && p == filepath.Join(dir, "dra") {
			return filepath.SkipDir // opt-in DRA: lists its own files (internal/dra TestDeviceClassesAPIServer)
		}
		if ext := filepath.Ext(p); !d.IsDir() && (ext == ".yaml" || ext == ".yml") && d.Name() != "kustomization.yaml" {
			rel, _ := filepath.Rel(dir, p)
			onDisk = append(onDisk, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	listed := slices.Clone(k.Resources)
	sort.Strings(onDisk)
	sort.Strings(listed)
	if !slices.Equal(onDisk, listed) {
		t.Fatalf("deploy/kustomization.yaml resources %v, files under deploy/ %v", listed, onDisk)
	}
	if len(k.Images) != 1 || k.Images[0].Name != "rdmanet/rdmanet" || k.Images[0].NewTag == "" {
		t.Fatalf("kustomization images = %+v, want one entry for rdmanet/rdmanet with newTag", k.Images)
	}
	// make image tags the image with the version its binaries report: VERSION
	if v, err := os.ReadFile(filepath.Join(dir, "..", "VERSION")); err != nil || strings.TrimSpace(string(v)) != k.Images[0].NewTag {
		t.Errorf("kustomization newTag %q, VERSION %q (%v): make image builds rdmanet/rdmanet:<VERSION>", k.Images[0].NewTag, v, err)
	}
	want := "rdmanet/rdmanet:" + k.Images[0].NewTag
	objs := loadDeploy(t)
	ds := deployTyped[appsv1.DaemonSet](t, objs, "DaemonSet", "rdmanet-node")
	ctrl := deployTyped[appsv1.Deployment](t, objs, "Deployment", "rdmanet-controller")
	var all []corev1.Container
	all = append(all, ds.Spec.Template.Spec.InitContainers...)
	all = append(all, ds.Spec.Template.Spec.Containers...)
	all = append(all, ctrl.Spec.Template.Spec.Containers...)
	for _, c := range all {
		if c.Image != want {
			t.Errorf("container %s: image %q, want %q (no registry host; the operator sets it)", c.Name, c.Image, want)
		}
	}
}

// TestDeployComponents: each optional component under deploy/components
// lists exactly its files; the monitoring component's Service selects
// rdmanet-node's pods and exposes the DaemonSet's named metrics ports, its
// ServiceMonitor scrapes those ports, and the real API server accepts the
// Service (it has no ServiceMonitor CRD: that object is checked by shape).
func TestDeployComponents(t *testing.T) {
	root := filepath.Join(deployDir(t), "components")
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	comps := map[string][]deployObject{}
	for _, en := range ents {
		dir := filepath.Join(root, en.Name())
		b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var k kustomization
		if err := yaml.UnmarshalStrict(b, &k); err != nil || k.Kind != "Component" || k.APIVersion != "kustomize.config.k8s.io/v1alpha1" {
			t.Fatalf("deploy/components/%s/kustomization.yaml: %v (kind %q, apiVersion %q): want a kustomize Component", en.Name(), err, k.Kind, k.APIVersion)
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		var onDisk []string
		for _, f := range files {
			if filepath.Base(f) != "kustomization.yaml" {
				onDisk = append(onDisk, filepath.Base(f))
			}
		}
		// a resource that is a directory (a kustomization, e.g. ../../dra)
		// is checked where it lives
		var listed []string
		for _, r := range k.Resources {
			if strings.HasSuffix(r, ".yaml") {
				listed = append(listed, r)
			}
		}
		sort.Strings(listed)
		if !slices.Equal(onDisk, listed) {
			t.Fatalf("deploy/components/%s lists %v, has %v", en.Name(), listed, onDisk)
		}
		comps[en.Name()] = decodeDeploy(t, dir, listed)
		if en.Name() == "dra" {
			checkDRAComponent(t, k)
		}
	}
	mon := comps["monitoring"]
	if len(mon) != 2 {
		t.Fatalf("monitoring component objects %v, want a Service and a ServiceMonitor", mon)
	}
	svc := deployTyped[corev1.Service](t, mon, "Service", "rdmanet-node-metrics")
	ds := deployTyped[appsv1.DaemonSet](t, loadDeploy(t), "DaemonSet", "rdmanet-node")
	for k, v := range svc.Spec.Selector {
		if ds.Spec.Template.Labels[k] != v {
			t.Fatalf("Service selector %v does not select rdmanet-node's pods (labels %v)", svc.Spec.Selector, ds.Spec.Template.Labels)
		}
	}
	ports := map[string]int32{}
	for _, c := range ds.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			ports[p.Name] = p.ContainerPort
		}
	}
	svcPorts := map[string]bool{}
	for _, p := range svc.Spec.Ports {
		if cp, ok := ports[p.TargetPort.String()]; !ok || cp != p.Port {
			t.Errorf("Service port %s: targetPort %s, port %d; the DaemonSet's ports are %v", p.Name, p.TargetPort.String(), p.Port, ports)
		}
		svcPorts[p.Name] = true
	}
	if len(svcPorts) != len(ports) {
		t.Errorf("Service ports %v, DaemonSet ports %v: every metrics port is scraped", svcPorts, ports)
	}
	var sm *unstructured.Unstructured
	for _, d := range mon {
		if d.obj.GetKind() == "ServiceMonitor" {
			sm = d.obj
		}
	}
	if sm == nil || sm.GetAPIVersion() != "monitoring.coreos.com/v1" || sm.GetNamespace() != deployNS {
		t.Fatalf("ServiceMonitor: %v", sm)
	}
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	for k, v := range sel {
		if svc.Labels[k] != v {
			t.Errorf("ServiceMonitor selector %v does not select the Service (labels %v)", sel, svc.Labels)
		}
	}
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(eps) != len(svcPorts) {
		t.Errorf("ServiceMonitor endpoints %v, want one per Service port %v", eps, svcPorts)
	}
	for _, ep := range eps {
		m, _ := ep.(map[string]any)
		if port, _ := m["port"].(string); !svcPorts[port] || m["path"] != "/metrics" {
			t.Errorf("ServiceMonitor endpoint %v: want a Service port name and path /metrics", m)
		}
	}
	// the real API server accepts the Service
	api := apiserver.Shared(t)
	createDeployNamespaces(t, api, loadDeploy(t))
	if err := apiserver.DryRunCreate(context.Background(), api.Config(), deployObjects(mon, "Service")...); err != nil {
		t.Fatal(err)
	}
}

// TestDeployDryRun: every object under deploy/ is accepted by the real API
// server — server-side dry-run create with strict field validation (CRDs
// the harness installed already exist: a dry-run server-side apply instead;
// apiserver.DryRunCreate). The namespaces are created for real first, so
// namespaced objects pass admission.
func TestDeployDryRun(t *testing.T) {
	api := apiserver.Shared(t)
	objs := loadDeploy(t)
	createDeployNamespaces(t, api, objs)
	if err := apiserver.DryRunCreate(context.Background(), api.Config(), deployObjects(objs)...); err != nil {
		t.Error(err)
	}
}

// createDeployNamespaces creates the Namespaces among objs for real (those
// missing), so the namespaced objects pass admission.
func createDeployNamespaces(t testing.TB, api *apiserver.Server, objs []deployObject) {
	t.Helper()
	mapper, dyn := dynamicClients(t, api)
	for _, d := range objs {
		if d.obj.GetKind() != "Namespace" {
			continue
		}
		if _, err := resourceFor(t, mapper, dyn, d).Create(context.Background(), d.obj.DeepCopy(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// deployObjects are the objects of objs, only those of the given kinds when
// any are given.
func deployObjects(objs []deployObject, kinds ...string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, d := range objs {
		if len(kinds) == 0 || slices.Contains(kinds, d.obj.GetKind()) {
			out = append(out, d.obj)
		}
	}
	return out
}

// dynamicClients are a discovery-backed RESTMapper and a dynamic client for api.
func dynamicClients(t testing.TB, api *apiserver.Server) (apimeta.RESTMapper, dynamic.Interface) {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(api.Config())
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(api.Config())
	if err != nil {
		t.Fatal(err)
	}
	return restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), dyn
}

func resourceFor(t testing.TB, mapper apimeta.RESTMapper, dyn dynamic.Interface, d deployObject) dynamic.ResourceInterface {
	t.Helper()
	gvk := d.obj.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Fatalf("%s: RESTMapper: %v", d, err)
	}
	if m.Scope.Name() == apimeta.RESTScopeNameNamespace {
		if d.obj.GetNamespace() == "" {
			t.Fatalf("%s: namespaced %s without metadata.namespace", d, gvk.Kind)
		}
		return dyn.Resource(m.Resource).Namespace(d.obj.GetNamespace())
	}
	if d.obj.GetNamespace() != "" {
		t.Fatalf("%s: cluster-scoped %s with metadata.namespace", d, gvk.Kind)
	}
	return dyn.Resource(m.Resource)
}

// applyDeploy creates (server-side apply) the deploy objects of the given kinds for real.
func applyDeploy(t testing.TB, api *apiserver.Server, kinds ...string) []deployObject {
	t.Helper()
	mapper, dyn := dynamicClients(t, api)
	objs := loadDeploy(t)
	force := true
	for _, d := range objs {
		if !slices.Contains(kinds, d.obj.GetKind()) {
			continue
		}
		data, err := json.Marshal(d.obj.Object)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := resourceFor(t, mapper, dyn, d).Patch(context.Background(), d.obj.GetName(), k8stypes.ApplyPatchType, data,
			metav1.PatchOptions{FieldManager: "rdmanet-deploy-test", Force: &force, FieldValidation: "Strict"}); err != nil {
			t.Fatalf("apply %s: %v", d, err)
		}
	}
	return objs
}

// TestDeployNodeConfig: the ConfigMaps' content parses with the code that
// reads it on the node, and the DaemonSet mounts every host path that config
// and the containers' flags name.
func TestDeployNodeConfig(t *testing.T) {
	objs := loadDeploy(t)
	conf, err := meta.ParseConfig([]byte(deployNodeConfig(t, objs, "00-rdmanet.conf")))
	if err != nil {
		t.Fatalf("00-rdmanet.conf: %v", err)
	}
	if conf.Source.Type != "kubernetes" || conf.DaemonSocket == "" || conf.DeviceInfoDir == "" {
		t.Fatalf("00-rdmanet.conf: source %q, daemonSocket %q, deviceInfoDir %q", conf.Source.Type, conf.DaemonSocket, conf.DeviceInfoDir)
	}
	// The seed's NAD, unchanged, takes the kubernetes store from the node config.
	var nad struct {
		Plugins []struct {
			IPAM json.RawMessage `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(seedNAD), &nad); err != nil {
		t.Fatal(err)
	}
	ic, err := ipam.Parse([]byte(`{"cniVersion":"0.3.1","name":"face-training-rdma","ipam":`+string(nad.Plugins[0].IPAM)+`}`),
		ipam.Env{NodeConfig: []byte(deployNodeConfig(t, objs, "rdmanet-ipam.conf"))})
	if err != nil {
		t.Fatalf("seed NAD with rdmanet-ipam.conf: %v", err)
	}
	if ic.Store.Type != ipam.StoreKubernetes || ic.Store.Kubeconfig != "/etc/cni/net.d/rdmanet-ipam.d/rdmanet-ipam.kubeconfig" ||
		ic.Store.Path != ipam.DefaultLocalStorePath {
		t.Fatalf("rdmanet-ipam.conf gives store %+v", ic.Store)
	}
	if conf.Kubeconfig != "/etc/cni/net.d/rdmanet.d/rdmanet.kubeconfig" {
		t.Fatalf("00-rdmanet.conf kubeconfig %q is not where install.sh writes it", conf.Kubeconfig)
	}

	ds := deployTyped[appsv1.DaemonSet](t, objs, "DaemonSet", "rdmanet-node")
	pod := ds.Spec.Template.Spec
	daemon := deployContainer(t, pod.Containers, "rdmanet-daemon")
	agent := deployContainer(t, pod.Containers, "rdmanet-agent")
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken || pod.ServiceAccountName != "rdmanet-daemon" {
		t.Errorf("pod: serviceAccountName %q, automountServiceAccountToken %v", pod.ServiceAccountName, pod.AutomountServiceAccountToken)
	}
	if !pod.HostNetwork || len(pod.Tolerations) != 1 || pod.Tolerations[0].Operator != corev1.TolerationOpExists || pod.Tolerations[0].Key != "" {
		t.Errorf("pod: hostNetwork %v, tolerations %+v: want hostNetwork and one toleration of every taint", pod.HostNetwork, pod.Tolerations)
	}
	env := map[string]string{}
	for _, e := range daemon.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	if env["NODE_NAME"] != "spec.nodeName" || env["NODENAME"] != "spec.nodeName" {
		t.Errorf("rdmanet-daemon env from the downward API: %v", env)
	}
	// The probes are HTTP GETs of the daemon's own /readyz and /healthz
	// (no shell in the image; /readyz probes the config's daemonSocket and
	// the plugin socket): TestDeployBinaryFlags checks them and the port.
	if p := daemon.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
		t.Errorf("rdmanet-daemon readiness probe %+v is not an HTTP GET of /readyz", daemon.ReadinessProbe)
	}
	for _, a := range agent.Args {
		if strings.HasPrefix(a, "--sysfs-root=") || strings.HasPrefix(a, "--proc-root=") {
			continue
		}
		if k, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(v, "/") {
			mountedIn(t, agent, k, v)
		}
	}
	for _, a := range daemon.Args {
		if k, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(v, "/") {
			mountedIn(t, daemon, k, v)
		}
	}
	for _, p := range []struct{ field, path string }{
		{"kubeconfig", conf.Kubeconfig}, {"confDir", conf.ConfDir}, {"binDir", conf.BinDir}, {"cniDir", conf.CNIDir},
		{"podResourcesSocket", conf.PodResourcesSocket}, {"deviceInfoDir", conf.DeviceInfoDir}, {"daemonSocket", conf.DaemonSocket},
		{"ipam store.kubeconfig", ic.Store.Kubeconfig}, {"ipam store.path", ic.Store.Path},
		{"sriov state", "/var/lib/cni/sriov"}, {"rdma state", "/var/lib/cni/rdma"}, {"netns", "/var/run/netns"},
	} {
		mountedIn(t, daemon, p.field, p.path)
	}
}

// mountedIn fails unless path lies under one of c's volume mounts.
func mountedIn(t testing.TB, c corev1.Container, what, path string) {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if path == m.MountPath || strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/") {
			return
		}
	}
	t.Errorf("container %s: %s %s is not under any volume mount", c.Name, what, path)
}

// TestDeployBinaryFlags: the real binaries accept the manifests' flags.
// rdmanet-daemon parses the DaemonSet's args (then --help stops it);
// rdmanet-agent runs with the DaemonSet's args and config in --once mode on
// the simulated node and builds the seed's pool from it. (rdmanet-ipam gc
// runs with the CronJob's args in TestDeployRBAC.)
func TestDeployBinaryFlags(t *testing.T) {
	objs := loadDeploy(t)
	pod := deployTyped[appsv1.DaemonSet](t, objs, "DaemonSet", "rdmanet-node").Spec.Template.Spec
	t.Run("rdmanet-daemon", func(t *testing.T) {
		c := deployContainer(t, pod.Containers, "rdmanet-daemon")
		out, err := exec.Command(filepath.Join(binDir, "rdmanet-daemon"), append(slices.Clone(c.Args), "--help")...).CombinedOutput()
		if err != nil {
			t.Fatalf("rdmanet-daemon %v --help: %v\n%s", c.Args, err, out)
		}
	})
	t.Run("rdmanet-daemon --probe", func(t *testing.T) {
		c := deployContainer(t, pod.Containers, "rdmanet-daemon")
		probeDaemon(t, objs, append(slices.Clone(c.Command), deployArg(t, c.Args, "--config"), "--probe"))
	})
	for _, name := range []string{"rdmanet-agent", "rdmanet-daemon"} {
		t.Run(name+" probes and metrics port", func(t *testing.T) {
			deployProbes(t, deployContainer(t, pod.Containers, name))
		})
	}
	t.Run("rdmanet-agent", func(t *testing.T) {
		dir := t.TempDir()
		if err := pluginbin.Build(dir, "github.com/rdmanet/rdmanet/cmd/rdmanet-agent"); err != nil {
			t.Fatal(err)
		}
		fix, err := sysfsfixture.NewStandard(filepath.Join(dir, "sys"), sysfsfixture.StandardOptions{RoCEVFs: 4})
		if err != nil {
			t.Fatal(err)
		}
		cm := deployTyped[corev1.ConfigMap](t, objs, "ConfigMap", "rdmanet-agent-config")
		confFile := filepath.Join(dir, "config.json")
		if err := os.WriteFile(confFile, []byte(cm.Data["config.json"]), 0o644); err != nil {
			t.Fatal(err)
		}
		c := deployContainer(t, pod.Containers, "rdmanet-agent")
		var args []string
		for _, a := range c.Args {
			switch k, _, _ := strings.Cut(a, "="); k {
			case "--config":
				a = "--config=" + confFile
			case "--sysfs-root":
				a = "--sysfs-root=" + fix.Root
			case "--device-plugin-dir", "--devinfo-dir":
				a = k + "=" + filepath.Join(dir, strings.TrimPrefix(k, "--"))
			}
			args = append(args, a)
		}
		out, err := exec.Command(filepath.Join(dir, "rdmanet-agent"), append(args, "--once", "-o", "json")...).CombinedOutput()
		if err != nil {
			t.Fatalf("rdmanet-agent %v --once: %v\n%s", args, err, out)
		}
		if !bytes.Contains(out, []byte(`"example.com/sriov_rdma"`)) {
			t.Fatalf("rdmanet-agent --once with the deploy config does not report the seed pool:\n%s", out)
		}
	})
}

// deployProbes: the container serves --metrics-addr on the node's IP at
// the port its containerPort names, and its readiness and liveness probes
// are HTTP GETs of /readyz and /healthz on that port (the image has no
// shell; hostNetwork: kubelet reaches the pod's IP, the node's).
func deployProbes(t *testing.T, c corev1.Container) {
	t.Helper()
	addr := strings.TrimPrefix(deployArg(t, c.Args, "--metrics-addr"), "--metrics-addr=")
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "$(NODE_IP)" {
		t.Fatalf("%s --metrics-addr=%s: want [$(NODE_IP)]:<port> (%v)", c.Name, addr, err)
	}
	var env bool
	for _, e := range c.Env {
		env = env || e.Name == "NODE_IP" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.hostIP"
	}
	if !env {
		t.Fatalf("%s: no NODE_IP from status.hostIP for --metrics-addr", c.Name)
	}
	if len(c.Ports) != 1 || strconv.Itoa(int(c.Ports[0].ContainerPort)) != port || c.Ports[0].Name == "" {
		t.Fatalf("%s ports %+v, want one named port %s", c.Name, c.Ports, port)
	}
	for _, p := range []struct {
		kind, path string
		probe      *corev1.Probe
	}{{"readiness", "/readyz", c.ReadinessProbe}, {"liveness", "/healthz", c.LivenessProbe}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != c.Ports[0].Name {
			t.Errorf("%s %s probe %+v: want an HTTP GET of %s on port %s", c.Name, p.kind, p.probe, p.path, c.Ports[0].Name)
		}
	}
}

var deployUniq atomic.Int64

func deployName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e6, deployUniq.Add(1))
}

// installNode runs the DaemonSet's installer (the init container's
// rdmanet-install with its args, every path moved into a temporary root),
// with the e2e binaries as the image's and the given token as the pod's
// projected one. It returns the CNI config dir it wrote.
func installNode(t *testing.T, api *apiserver.Server, objs []deployObject, token string) string {
	t.Helper()
	root := t.TempDir()
	cfg := api.Config()
	ca, err := os.ReadFile(cfg.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	configDir, tokenDir := filepath.Join(root, "config"), filepath.Join(root, "tokens")
	cm := deployTyped[corev1.ConfigMap](t, objs, "ConfigMap", "rdmanet-node-config")
	for k, v := range cm.Data {
		writeFile(t, filepath.Join(configDir, k), v, 0o644)
	}
	// the projected volume node-token: the pod's token and kube-root-ca.crt
	writeFile(t, filepath.Join(tokenDir, "token"), token, 0o400)
	writeFile(t, filepath.Join(tokenDir, "ca.crt"), string(ca), 0o400)
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	confDir, cniBin := filepath.Join(root, "etc/cni/net.d"), filepath.Join(root, "opt/cni/bin")
	init := deployTyped[appsv1.DaemonSet](t, objs, "DaemonSet", "rdmanet-node").Spec.Template.Spec.InitContainers
	if len(init) != 1 || !slices.Equal(init[0].Command, []string{"/opt/rdmanet/bin/rdmanet-install"}) {
		t.Fatalf("init containers %+v: want one running /opt/rdmanet/bin/rdmanet-install (the image has no shell)", init)
	}
	installer := t.TempDir()
	if err := pluginbin.Build(installer, "github.com/rdmanet/rdmanet/cmd/rdmanet-install"); err != nil {
		t.Fatal(err)
	}
	// every path flag moves into the temporary root; the host paths must be mounted
	moved := map[string]string{"--src-dir": binDir, "--cni-bin-dir": cniBin, "--cni-conf-dir": confDir, "--config-dir": configDir, "--token-dir": tokenDir}
	var args []string
	for _, a := range init[0].Args {
		k, v, _ := strings.Cut(a, "=")
		if to, ok := moved[k]; ok {
			switch k {
			case "--src-dir": // the image's own directory
			case "--token-dir": // the projected token volume
				mountedIn(t, init[0], k, v+"/token")
				mountedIn(t, init[0], k, v+"/ca.crt")
			default:
				mountedIn(t, init[0], k, v)
			}
			a = k + "=" + to
			delete(moved, k)
		} else if strings.HasPrefix(v, "/") {
			t.Fatalf("install-cni arg %s: a path this test does not move into its root", a)
		}
		args = append(args, a)
	}
	if len(moved) != 0 {
		t.Fatalf("install-cni args %v do not set %v (the defaults would be used)", init[0].Args, moved)
	}
	if len(init[0].Env) != 0 {
		t.Errorf("install-cni env %v: every setting is a flag", init[0].Env)
	}
	cmd := exec.Command(filepath.Join(installer, "rdmanet-install"), args...)
	cmd.Env = append(os.Environ(), "KUBERNETES_SERVICE_HOST="+u.Hostname(), "KUBERNETES_SERVICE_PORT="+u.Port())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("rdmanet-install %v: %v\n%s", args, err, out)
	} else if !bytes.Contains(out, []byte("rdmanet-install: done")) {
		t.Fatalf("rdmanet-install printed no summary:\n%s", out)
	}
	for _, b := range []string{"rdmanet", "rdmanet-direct", "sriov", "sriov-direct", "rdma", "rdma-direct", "rdmanet-ipam", "rdmanet-ipam-direct", "whereabouts"} {
		if st, err := os.Stat(filepath.Join(cniBin, b)); err != nil || st.Mode().Perm() != 0o755 {
			t.Errorf("rdmanet-install: %s/%s: %v %v", cniBin, b, st, err)
		}
	}
	for _, f := range []string{"rdmanet.d/token", "rdmanet.d/rdmanet.kubeconfig", "rdmanet-ipam.d/rdmanet-ipam.kubeconfig"} {
		if st, err := os.Stat(filepath.Join(confDir, f)); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("rdmanet-install: %s: %v %v, want mode 0600", f, st, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(confDir, "00-rdmanet.conf")); err != nil || string(b) != cm.Data["00-rdmanet.conf"] {
		t.Errorf("rdmanet-install: 00-rdmanet.conf = %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(confDir, "rdmanet-ipam.d/rdmanet-ipam.conf")); err != nil || string(b) != cm.Data["rdmanet-ipam.conf"] {
		t.Errorf("rdmanet-install: rdmanet-ipam.conf = %q, %v", b, err)
	}
	return confDir
}

// deployArg returns the value of flag in args as "flag=value".
func deployArg(t testing.TB, args []string, flag string) string {
	t.Helper()
	for _, a := range args {
		if k, _, _ := strings.Cut(a, "="); k == flag {
			return a
		}
	}
	t.Fatalf("no %s in %v", flag, args)
	return ""
}

// probeDaemon runs the readiness probe's command (the real rdmanet-daemon)
// with its --config pointing at a copy of the ConfigMap's 00-rdmanet.conf
// whose daemonSocket is in a temporary directory: not ready without a
// daemon there, ready once a daemon answers on the socket.
func probeDaemon(t *testing.T, objs []deployObject, command []string) {
	t.Helper()
	dir := t.TempDir()
	var conf map[string]any
	if err := json.Unmarshal([]byte(deployNodeConfig(t, objs, "00-rdmanet.conf")), &conf); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "daemon.sock")
	conf["daemonSocket"] = sock
	b, _ := json.Marshal(conf)
	confFile := filepath.Join(dir, "00-rdmanet.conf")
	writeFile(t, confFile, string(b), 0o644)
	var args []string
	for _, a := range command[1:] {
		if strings.HasPrefix(a, "--config=") {
			a = "--config=" + confFile
		}
		args = append(args, a)
	}
	probe := func() (int, string) {
		out, err := exec.Command(filepath.Join(binDir, filepath.Base(command[0])), args...).CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(out)
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	if code, out := probe(); code == 0 {
		t.Fatalf("probe %v without a daemon: ready\n%s", args, out)
	}
	d := &daemon.MetaServer{Socket: sock, Log: slog.New(slog.DiscardHandler), Source: &meta.StaticSource{Dir: dir}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, out := probe()
		if code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("probe %v with the daemon serving: exit %d\n%s", args, code, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func writeFile(t testing.TB, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func mintToken(t testing.TB, admin kubernetes.Interface, sa string) string {
	t.Helper()
	exp := int64(3600)
	tr, err := admin.CoreV1().ServiceAccounts(deployNS).CreateToken(context.Background(), sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", deployNS, sa, err)
	}
	return tr.Status.Token
}

// forbidden runs each call and requires a 403 from the API server.
func forbidden(t *testing.T, calls []apiCall) {
	t.Helper()
	for _, c := range calls {
		t.Run("forbidden/"+c.name, func(t *testing.T) {
			err := c.call(context.Background())
			if !apierrors.IsForbidden(err) {
				t.Fatalf("want Forbidden, got %v", err)
			}
		})
	}
}

type apiCall struct {
	name string
	call func(context.Context) error
}

// TestDeployRBAC: with the deploy ServiceAccounts, ClusterRoles and
// bindings created for real and a TokenRequest token per ServiceAccount,
// written on a simulated node by the DaemonSet's installer script (and for
// gc, the CronJob's kubeconfig), each component's real code path works, and
// calls outside its role are Forbidden.
func TestDeployRBAC(t *testing.T) {
	api := apiserver.Shared(t)
	ctx := context.Background()
	admin, err := kubernetes.NewForConfig(api.Config())
	if err != nil {
		t.Fatal(err)
	}
	nads, err := nadclient.NewForConfig(api.Config())
	if err != nil {
		t.Fatal(err)
	}
	objs := applyDeploy(t, api, "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding")
	// One node identity (the rdmanet-node pod's ServiceAccount) for every
	// component on the node. The policies that narrow its writes to its
	// own node (deploy/policy) are not installed here: test/nodeidentity
	// proves them with node-bound tokens.
	confDir := installNode(t, api, objs, mintToken(t, admin, "rdmanet-daemon"))

	// Objects the components work on.
	ns := deployName("deploy-rbac")
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nad := &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Name: "face-training-rdma", Namespace: ns,
		Annotations: map[string]string{"k8s.v1.cni.cncf.io/resourceName": resourceName}}, Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: seedNAD}}
	if _, err := nads.K8sCniCncfIoV1().NetworkAttachmentDefinitions(ns).Create(ctx, nad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mkPod := func(name, node string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		p, err := admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	mine, other := mkPod("on-this-node", nodeName), mkPod("on-other-node", "gpu-node-2")

	t.Run("rdmanet-daemon", func(t *testing.T) {
		kubeconfig := filepath.Join(confDir, "rdmanet.d", "rdmanet.kubeconfig")
		live, err := kube.NewKubeSource(kubeconfig, 0)
		if err != nil {
			t.Fatal(err)
		}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		src, err := kube.NewCachedSource(sctx, live, nodeName)
		if err != nil {
			t.Fatalf("informers with the rdmanet-daemon token: %v", err)
		}
		if _, err := src.Pod(ctx, ns, mine.Name); err != nil {
			t.Fatalf("pod of this node: %v", err)
		}
		if _, err := src.Pod(ctx, ns, other.Name); err != nil { // cache miss: live GET
			t.Fatalf("live GET of a pod: %v", err)
		}
		if _, err := src.NAD(ctx, ns, nad.Name); err != nil {
			t.Fatalf("NAD: %v", err)
		}
		if _, err := src.NAD(ctx, ns, "absent"); !errors.Is(err, meta.ErrNotFound) { // cache miss: live GET
			t.Fatalf("live GET of an absent NAD: %v, want ErrNotFound", err)
		}
		// The informers keep up: a NAD created now reaches the cache. Their
		// watches are allowed (checked directly: a reflector whose watch is
		// refused falls back to relisting, which would hide it), and so are
		// their lists (below).
		later := nad.DeepCopy()
		later.Name, later.ResourceVersion = "created-after-sync", ""
		if _, err := nads.K8sCniCncfIoV1().NetworkAttachmentDefinitions(ns).Create(ctx, later, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if _, err := src.NADCached(ctx, ns, later.Name); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("a NAD created after the first sync never reached the informer cache (watch)")
			}
		}
		w, err := live.Core.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodeName})
		if err != nil {
			t.Fatalf("watch of this node's pods: %v", err)
		}
		w.Stop()
		if w, err = live.NADs.K8sCniCncfIoV1().NetworkAttachmentDefinitions("").Watch(ctx, metav1.ListOptions{}); err != nil {
			t.Fatalf("watch of NADs: %v", err)
		}
		w.Stop()
		// client-go's informers make their first list a streaming watch
		// (WatchListClient) and fall back to a plain list on API servers
		// without it: that list must be allowed too.
		if _, err := live.Core.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodeName}); err != nil {
			t.Fatalf("list of this node's pods: %v", err)
		}
		if _, err := live.NADs.K8sCniCncfIoV1().NetworkAttachmentDefinitions("").List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatalf("list of NADs: %v", err)
		}
		st := []nadv1.NetworkStatus{{Name: ns + "/" + nad.Name, Interface: "net1", IPs: []string{"10.60.1.5"}}}
		if err := src.SetNetworkStatus(ctx, ns, mine.Name, mine.UID, devinfo.Statuses(st)); err != nil {
			t.Fatalf("SetNetworkStatus with the rdmanet-daemon token: %v", err)
		}
		got, err := admin.CoreV1().Pods(ns).Get(ctx, mine.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(got.Annotations[meta.NetworkStatusAnnotation], "10.60.1.5") {
			t.Fatalf("network-status not written: %v", got.Annotations)
		}
		// A failed ADD's Event on the pod, recorded with the daemon's token.
		ev := kube.NewKubeEvents(live.Core, nodeName)
		ev.AttachFailed(meta.PodIdentity{Namespace: ns, Name: mine.Name, UID: mine.UID}, "c0ffee", errors.New("deploy test: attach failed"))
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			l, err := admin.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + mine.Name})
			if err != nil {
				t.Fatal(err)
			}
			if len(l.Items) > 0 && l.Items[0].Reason == kube.EventReasonAttachFailed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s Event on pod %s written with the rdmanet-daemon token (events create): %+v", kube.EventReasonAttachFailed, mine.Name, l.Items)
			}
		}
		ev.Shutdown()
		// rdmanet-agent reads the same kubeconfig (the DaemonSet's
		// --kubeconfig) to annotate its Node (deploy/rbac-agent.yaml).
		if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		ann, err := agent.NewNodeAnnotator(live.Core, nodeName, nil)
		if err != nil {
			t.Fatal(err)
		}
		actx, acancel := context.WithCancel(ctx)
		go ann.Run(actx)
		ann.Observe(inventory.NetnsShared)
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			n, err := admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
			if err == nil && n.Annotations[agent.AnnotationNetnsMode] == inventory.NetnsShared {
				break
			}
			if time.Now().After(deadline) {
				acancel()
				t.Fatalf("rdmanet-agent with the DaemonSet's kubeconfig did not annotate node %s with %s=%s in 30 s (nodes get, patch: deploy/rbac-agent.yaml)", nodeName, agent.AnnotationNetnsMode, inventory.NetnsShared)
			}
		}
		acancel()
		rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		store, err := ipam.NewKubeStore(rc)
		if err != nil {
			t.Fatal(err)
		}
		core := live.Core.CoreV1()
		forbidden(t, []apiCall{
			{"delete pod", func(ctx context.Context) error { return core.Pods(ns).Delete(ctx, other.Name, metav1.DeleteOptions{}) }},
			{"patch pod", func(ctx context.Context) error {
				_, err := core.Pods(ns).Patch(ctx, mine.Name, k8stypes.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
				return err
			}},
			{"update pod status", func(ctx context.Context) error {
				_, err := core.Pods(ns).UpdateStatus(ctx, got, metav1.UpdateOptions{})
				return err
			}},
			{"create pod", func(ctx context.Context) error {
				_, err := core.Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: mine.Spec}, metav1.CreateOptions{})
				return err
			}},
			{"list secrets", func(ctx context.Context) error {
				_, err := core.Secrets("").List(ctx, metav1.ListOptions{})
				return err
			}},
			{"list nodes", func(ctx context.Context) error { _, err := core.Nodes().List(ctx, metav1.ListOptions{}); return err }},
			{"delete NAD", func(ctx context.Context) error {
				return live.NADs.K8sCniCncfIoV1().NetworkAttachmentDefinitions(ns).Delete(ctx, nad.Name, metav1.DeleteOptions{})
			}},
			// (ipamblocks: the node identity is rdmanet-ipam's too since 0.3.)
			{"delete ipamblock", func(ctx context.Context) error {
				return store.Delete(ctx, &v1alpha1.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: "any"}})
			}},
		})
	})

	// The IPAM plugin's allocations on a node that does not exist, for pods
	// that do not exist: what gc then collects.
	network := deployName("deploy-rbac-net")
	ipamNode := deployName("deploy-gone-node")
	ipamCfg, err := ipam.Parse([]byte(`{"cniVersion":"1.0.0","name":"t","ipam":{"range":"10.77.0.0/24","network_name":"`+network+`"}}`), ipam.Env{})
	if err != nil {
		t.Fatal(err)
	}
	r := ipamCfg.Ranges[0]
	pool := ipam.Pool{Network: network, Prefix: r.Prefix}
	t.Run("rdmanet-ipam", func(t *testing.T) {
		rc, err := ipam.RESTConfigFromKubeconfig(filepath.Join(confDir, "rdmanet-ipam.d", "rdmanet-ipam.kubeconfig"))
		if err != nil {
			t.Fatal(err)
		}
		store, err := ipam.NewKubeStore(rc)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		// Two allocators of one node: the second has no cache and lists, reads, updates.
		alloc := func() *ipam.Allocator {
			return &ipam.Allocator{Store: store, Node: ipamNode, Lock: &ipam.FileLock{Dir: dir}, StateDir: t.TempDir()}
		}
		a, b := alloc(), alloc()
		owners := []ipam.Owner{
			{ContainerID: "c1", IfName: "net1", PodNamespace: ns, PodName: "gone-1", PodUID: "u1"},
			{ContainerID: "c2", IfName: "net1", PodNamespace: ns, PodName: "gone-2", PodUID: "u2"},
		}
		for i, o := range owners {
			al := []*ipam.Allocator{a, b}[i]
			if _, err := al.Allocate(ctx, network, r, o); err != nil {
				t.Fatalf("allocate with the node token (rdmanet-ipam kubeconfig): %v", err)
			}
		}
		// A repeated ADD answered from b's node cache is confirmed with a GET.
		if _, err := b.Allocate(ctx, network, r, owners[1]); err != nil {
			t.Fatalf("repeated allocate with the node token (rdmanet-ipam kubeconfig): %v", err)
		}
		if err := b.Release(ctx, pool, owners[0]); err != nil {
			t.Fatalf("release with the node token (rdmanet-ipam kubeconfig): %v", err)
		}
		blocks, err := store.List(ctx, pool, ipamNode)
		if err != nil || len(blocks) != 1 {
			t.Fatalf("blocks of %s: %d, %v", ipamNode, len(blocks), err)
		}
		cl, err := gc.NewKubeCluster(rc)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			t.Fatal(err)
		}
		// (The node identity reads pods: the meta CNI's pod cache. rdmanet-ipam
		// has no identity of its own since 0.3.)
		forbidden(t, []apiCall{
			{"delete ipamblock", func(ctx context.Context) error { return store.Delete(ctx, &blocks[0]) }},
			{"list nodes", func(ctx context.Context) error { _, err := cl.Nodes(ctx); return err }},
			{"list secrets", func(ctx context.Context) error {
				_, err := cs.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
				return err
			}},
		})
	})
}

// checkDRAComponent: the DRA component brings deploy/dra and patches the
// agent (containers/0, checked by the patch's own test op) with --dra and
// each host directory a DRA kubelet plugin shares with kubelet and the
// runtime, mounted at the same path inside as outside.
func checkDRAComponent(t *testing.T, k kustomization) {
	t.Helper()
	if !slices.Contains(k.Resources, "../../dra") {
		t.Errorf("deploy/components/dra resources %v, want ../../dra", k.Resources)
	}
	if len(k.Patches) != 1 || k.Patches[0].Target["kind"] != "DaemonSet" || k.Patches[0].Target["name"] != "rdmanet-node" {
		t.Fatalf("deploy/components/dra patches %+v, want one JSON patch of DaemonSet rdmanet-node", k.Patches)
	}
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if err := yaml.UnmarshalStrict([]byte(k.Patches[0].Patch), &ops); err != nil {
		t.Fatalf("deploy/components/dra patch: %v", err)
	}
	var dra bool
	mounts, hostPaths := map[string]string{}, map[string]string{}
	for _, op := range ops {
		switch op.Path {
		case "/spec/template/spec/containers/0/args/-":
			dra = dra || string(op.Value) == `"--dra"`
		case "/spec/template/spec/containers/0/volumeMounts/-":
			var m corev1.VolumeMount
			if err := json.Unmarshal(op.Value, &m); err != nil {
				t.Fatal(err)
			}
			mounts[m.Name] = m.MountPath
		case "/spec/template/spec/volumes/-":
			var v corev1.Volume
			if err := json.Unmarshal(op.Value, &v); err != nil || v.HostPath == nil {
				t.Fatalf("volume %s: %v (want a hostPath)", op.Value, err)
			}
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	if !dra {
		t.Error("deploy/components/dra does not add --dra to the agent")
	}
	for _, want := range []string{"/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/plugins/rdma.rdmanet.io", "/var/run/cdi"} {
		var found bool
		for name, mp := range mounts {
			if mp == want {
				found = true
				if hostPaths[name] != mp {
					t.Errorf("volume %s: mounted at %s, host path %q: a DRA plugin's directories are the same path inside and outside", name, mp, hostPaths[name])
				}
			}
		}
		if !found {
			t.Errorf("deploy/components/dra mounts %v, want %s", mounts, want)
		}
	}
}
