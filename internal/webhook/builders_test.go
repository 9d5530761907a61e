package webhook

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/rdmanet/rdmanet/internal/manifest"
)

const testNS = "ai-training"

// podB builds a pod for tests.
type podB struct{ p *corev1.Pod }

func newPod(name string) *podB {
	return &podB{p: &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec: corev1.PodSpec{
			DNSPolicy:  corev1.DNSClusterFirst,
			Containers: []corev1.Container{{Name: "trainer", Image: "trainer:latest"}},
		},
	}}
}

func (b *podB) ann(k, v string) *podB {
	if b.p.Annotations == nil {
		b.p.Annotations = map[string]string{}
	}
	b.p.Annotations[k] = v
	return b
}

func (b *podB) env(name, value string) *podB {
	c := &b.p.Spec.Containers[0]
	c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
	return b
}

func (b *podB) limit(name, q string) *podB {
	c := &b.p.Spec.Containers[0]
	if c.Resources.Limits == nil {
		c.Resources.Limits = corev1.ResourceList{}
		c.Resources.Requests = corev1.ResourceList{}
	}
	c.Resources.Limits[corev1.ResourceName(name)] = resource.MustParse(q)
	c.Resources.Requests[corev1.ResourceName(name)] = resource.MustParse(q)
	return b
}

func (b *podB) sidecar(name string) *podB {
	b.p.Spec.Containers = append(b.p.Spec.Containers, corev1.Container{Name: name, Image: "sidecar:latest"})
	return b
}

func (b *podB) ipcLock() *podB {
	b.p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"IPC_LOCK"}}}
	return b
}

func (b *podB) with(f func(*corev1.Pod)) *podB { f(b.p); return b }

func (b *podB) pod() *corev1.Pod { return b.p.DeepCopy() }

// Networks as deploy/ and examples/cluster define them.
const (
	sriovConfig   = `{"cniVersion":"0.3.1","name":"face-training-rdma","plugins":[{"type":"sriov","ipam":{"type":"whereabouts","range":"10.60.0.0/16"}},{"type":"rdma"}]}`
	macvlanConfig = `{"cniVersion":"0.3.1","name":"rdmashared-net","type":"macvlan","master":"ens8f0np0","mode":"bridge","ipam":{"type":"whereabouts","range":"192.168.2.0/24"}}`
	bridgeConfig  = `{"cniVersion":"0.3.1","name":"plain","type":"bridge","bridge":"br0","ipam":{"type":"host-local","subnet":"10.9.0.0/24"}}`
)

func nadU(name, resourceName, config string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
		"metadata": map[string]any{"name": name, "namespace": testNS},
		"spec":     map[string]any{"config": config},
	}}
	if resourceName != "" {
		u.SetAnnotations(map[string]string{manifest.ResourceNameAnnotation: resourceName})
	}
	return u
}

func nadObj(t *testing.T, u *unstructured.Unstructured) *manifest.Object {
	t.Helper()
	o, err := objectFrom(u.Object, "test")
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func nadInfo(t *testing.T, u *unstructured.Unstructured) *NAD {
	t.Helper()
	ns := manifest.NADFromObject(nadObj(t, u))
	if len(ns) != 1 {
		t.Fatalf("NAD %s not decoded", u.GetName())
	}
	return NADFromManifest(ns[0])
}

func podObj(t *testing.T, p *corev1.Pod) *manifest.Object {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	o, err := objectFrom(m, "test")
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func envOf(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		out[e.Name] = e.Value
	}
	return out
}
