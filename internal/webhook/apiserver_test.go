package webhook

// Tests against a real kube-apiserver + etcd (test/apiserver; without the
// binaries they skip, with CI=true they fail): the webhooks served by a
// controller-runtime manager through Setup, on 127.0.0.1 with the
// certificates of package certs, called by the API server for real pod
// creations; and the certificate manager's Secret and caBundle patching.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/rdmanet/rdmanet/internal/webhook/certs"
	"github.com/rdmanet/rdmanet/test/apiserver"
)

// TestMain stops the API server the tests share (apiserver.Shared).
func TestMain(m *testing.M) {
	code := m.Run()
	apiserver.StopShared()
	os.Exit(code)
}

// warnings records the Warning headers the API server sends.
type warnings struct {
	mu  sync.Mutex
	got []string
}

func (w *warnings) HandleWarningHeader(code int, agent, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.got
	w.got = nil
	return out
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func eventually(t *testing.T, limit time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(limit)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s: %v", what, limit, err)
}

// neverSelector matches no namespace: the service-backed configurations of
// the caBundle test must not be called (their Service does not exist).
var neverSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"rdmanet.io/test-never": "true"}}

func TestWebhooksAgainstAPIServer(t *testing.T) {
	srv := apiserver.Shared(t)
	ctx, cancelAll := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancelAll()
	cfg := srv.Config()
	cs := kubernetes.NewForConfigOrDie(cfg)
	rec := &warnings{}
	wcfg := rest.CopyConfig(cfg)
	wcfg.WarningHandler = rec
	wcs := kubernetes.NewForConfigOrDie(wcfg)

	// enforcedNS is labelled rdmanet.io/enforce=true: every RDMA pod's
	// errors deny there, opted in or not.
	const enforcedNS = "ai-training-enforced"
	for ns, labels := range map[string]map[string]string{testNS: nil, DefaultNamespace: nil, enforcedNS: {NamespaceLabelEnforce: "true"}} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	dc := dynamic.NewForConfigOrDie(cfg)
	nadRes := NADGVK.GroupVersion().WithResource("network-attachment-definitions")
	for _, ns := range []string{testNS, enforcedNS} {
		nad := nadU("face-training-rdma", "example.com/sriov_rdma", sriovConfig)
		nad.SetNamespace(ns)
		if _, err := dc.Resource(nadRes).Namespace(ns).Create(ctx, nad, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}

	// Service-backed configurations named like deploy/'s, plus a URL webhook
	// in the same configuration: the certificate manager must patch only
	// the service-backed ones.
	svcM, svcV, err := Configurations(ConfigOptions{NamespaceSelector: neverSelector, MutatingFailurePolicy: admissionregistrationv1.Ignore, ValidatingFailurePolicy: admissionregistrationv1.Ignore})
	if err != nil {
		t.Fatal(err)
	}
	urlStr := "https://127.0.0.1:1/never"
	extra := svcV.Webhooks[0].DeepCopy()
	extra.Name = "url.rdmanet.io"
	extra.ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &urlStr, CABundle: []byte("untouched")}
	svcV.Webhooks = append(svcV.Webhooks, *extra)
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, svcM, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, svcV, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The manager, as rdmanet-controller builds it, with our webhooks.
	ctrl.SetLogger(logr.Discard())
	port := freePort(t)
	probeAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	certDir := t.TempDir()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: probeAddr,
		WebhookServer:          crwebhook.NewServer(crwebhook.Options{Host: "127.0.0.1", Port: port, CertDir: certDir}),
	})
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{ManageCerts: true, CertDir: certDir, ExtraSANs: []string{"127.0.0.1"}}
	if err := Setup(mgr, opts); err != nil {
		t.Fatal(err)
	}
	mgrCtx, stopMgr := context.WithCancel(ctx)
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(mgrCtx) }()
	defer func() {
		stopMgr()
		<-mgrDone
	}()

	// The Secret appears and its CA bundle is patched into the
	// service-backed webhooks.
	var bundle []byte
	eventually(t, 30*time.Second, "certificate Secret", func() error {
		s, err := cs.CoreV1().Secrets(DefaultNamespace).Get(ctx, DefaultSecretName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		bundle = s.Data[certs.KeyCABundle]
		return certs.FromData(s.Data).Check(certs.Config{Service: DefaultServiceName, Namespace: DefaultNamespace, ExtraSANs: opts.ExtraSANs}, time.Now())
	})
	t.Run("caBundle patched into our service-backed webhooks only", func(t *testing.T) {
		eventually(t, 30*time.Second, "caBundle", func() error {
			m, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, DefaultConfigurationName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			v, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, DefaultConfigurationName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, w := range append([]admissionregistrationv1.WebhookClientConfig{m.Webhooks[0].ClientConfig}, v.Webhooks[0].ClientConfig, v.Webhooks[1].ClientConfig) {
				if !bytes.Equal(w.CABundle, bundle) {
					return fmt.Errorf("service-backed webhook (path %s) lacks the Secret's CA bundle", *w.Service.Path)
				}
			}
			if last := v.Webhooks[len(v.Webhooks)-1]; string(last.ClientConfig.CABundle) != "untouched" {
				return fmt.Errorf("URL webhook's caBundle changed to %q", last.ClientConfig.CABundle)
			}
			return nil
		})
	})

	// The replica turns ready once the Secret's certificate is written.
	eventually(t, 30*time.Second, "readyz", func() error {
		resp, err := http.Get("http://" + probeAddr + "/readyz/" + ReadyzCheckName)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz: %s", resp.Status)
		}
		return nil
	})

	// The webhook server serves the Secret's certificate (certwatcher
	// replaced the placeholder).
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(bundle)
	eventually(t, 30*time.Second, "webhook server serving the Secret's certificate", func() error {
		conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
		if err != nil {
			return err
		}
		return conn.Close()
	})

	// URL-backed configurations for the real calls.
	base := fmt.Sprintf("https://127.0.0.1:%d", port)
	urlM, urlV, err := Configurations(ConfigOptions{Name: "rdmanet-test", URL: base, CABundle: bundle})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, urlM, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, urlV, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), "rdmanet-test", metav1.DeleteOptions{})
		_ = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), "rdmanet-test", metav1.DeleteOptions{})
	}()
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	// The API server picks configurations up asynchronously: wait until a
	// dry-run opt-in pod comes back mutated.
	eventually(t, 30*time.Second, "webhook configurations in effect", func() error {
		p, err := cs.CoreV1().Pods(testNS).Create(ctx, newPod("probe").ann(AnnotationNetwork, "face-training-rdma").pod(), dry)
		if err != nil {
			return err
		}
		if len(p.Spec.Containers[0].Env) == 0 {
			return errors.New("pod not mutated yet")
		}
		return nil
	})

	t.Run("opt-in pod comes back mutated", func(t *testing.T) {
		p, err := cs.CoreV1().Pods(testNS).Create(ctx, newPod("exclusive-0").ann(AnnotationNetwork, "ai-training/face-training-rdma").limit("nvidia.com/gpu", "8").pod(), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c := p.Spec.Containers[0]
		checks := []struct {
			name      string
			got, want string
		}{
			{name: "networks", got: p.Annotations[NetworksAnnotation], want: `[{"interface":"net1","name":"face-training-rdma","namespace":"ai-training"}]`},
			{name: "resource limit", got: fmt.Sprint(c.Resources.Limits.Name("example.com/sriov_rdma", "DecimalSI")), want: "1"},
			{name: "resource request", got: fmt.Sprint(c.Resources.Requests.Name("example.com/sriov_rdma", "DecimalSI")), want: "1"},
			{name: "IPC_LOCK", got: fmt.Sprint(c.SecurityContext.Capabilities.Add), want: "[IPC_LOCK]"},
			{name: "env", got: fmt.Sprint(envOf(c)), want: "map[NCCL_IB_DISABLE:0 NCCL_SOCKET_IFNAME:=net1]"},
			{name: "affinity", got: fmt.Sprint(p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Values), want: "[exclusive]"},
		}
		for _, ck := range checks {
			if ck.got != ck.want {
				t.Errorf("%s = %s, want %s", ck.name, ck.got, ck.want)
			}
		}
	})

	// Not opted in, so not mutated; an RDMA pod by its NAD, without
	// IPC_LOCK (RDMA060).
	noIPCLock := func(ns string) *corev1.Pod {
		return goodExclusive().with(func(p *corev1.Pod) {
			p.Name, p.Namespace = "bad-0", ns
			p.Spec.Containers[0].SecurityContext = nil
		}).pod()
	}
	t.Run("enforced namespace: error-level rule denies with the rule id", func(t *testing.T) {
		_, err := cs.CoreV1().Pods(enforcedNS).Create(ctx, noIPCLock(enforcedNS), metav1.CreateOptions{})
		if err == nil {
			t.Fatal("pod admitted, want a denial")
		}
		for _, s := range []string{"enforce-pod.rdmanet.io", "RDMA060", "spec.containers[trainer].securityContext.capabilities.add", `fix: add securityContext.capabilities.add: ["IPC_LOCK"]`} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("denial lacks %q: %v", s, err)
			}
		}
	})

	t.Run("opted-in pod breaking an error-level rule is denied in any namespace", func(t *testing.T) {
		// The mutating webhook never removes what the user set: a pod that
		// drops every capability keeps no IPC_LOCK.
		p := newPod("opt-bad-0").ann(AnnotationNetwork, "face-training-rdma").env("NCCL_SOCKET_IFNAME", "eth1").pod()
		_, err := cs.CoreV1().Pods(testNS).Create(ctx, p, metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), "validate-pod.rdmanet.io") || !strings.Contains(err.Error(), "RDMA073") {
			t.Fatalf("opted-in pod with NCCL_SOCKET_IFNAME=eth1: %v, want a denial by validate-pod.rdmanet.io naming RDMA073", err)
		}
	})

	t.Run("not opted in, namespace not enforced: admitted with the errors as warnings", func(t *testing.T) {
		rec.take()
		if _, err := wcs.CoreV1().Pods(testNS).Create(ctx, noIPCLock(testNS), dry); err != nil {
			t.Fatalf("pod refused: %v", err)
		}
		got := strings.Join(rec.take(), "\n")
		for _, s := range []string{"RDMA060", "admitted because it does not opt in", "rdmanet.io/enforce=true", "fix: add securityContext.capabilities.add"} {
			if !strings.Contains(got, s) {
				t.Errorf("warnings lack %q: %s", s, got)
			}
		}
	})

	t.Run("not opted in, namespace not enforced: a pod that can never start is denied with the rule id", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			pod  *corev1.Pod
			rule string
		}{
			{name: "the NAD's resource not requested", rule: "RDMA014",
				pod: newPod("no-vf-0").ann(NetworksAnnotation, `[{"name":"face-training-rdma","interface":"net1"}]`).ipcLock().pod()},
			{name: "malformed networks annotation", rule: "RDMA001",
				pod: newPod("bad-annotation-0").ann(NetworksAnnotation, `[{"name":`).pod()},
		} {
			_, err := cs.CoreV1().Pods(testNS).Create(ctx, tc.pod, dry)
			if err == nil {
				t.Errorf("%s: pod admitted, want a denial naming %s", tc.name, tc.rule)
				continue
			}
			for _, s := range []string{"validate-pod.rdmanet.io", tc.rule + " (", "could never start", "fix: "} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%s: denial lacks %q: %v", tc.name, s, err)
				}
			}
		}
		// kube-system stays exempt: not even such a pod is sent
		p := newPod("system-bad-0").ann(NetworksAnnotation, `[{"name":`).with(func(p *corev1.Pod) { p.Namespace = "kube-system" }).pod()
		if _, err := cs.CoreV1().Pods("kube-system").Create(ctx, p, dry); err != nil {
			t.Errorf("kube-system pod with a malformed annotation: %v, want admitted (never sent to the webhooks)", err)
		}
	})

	t.Run("warning comes back as a warning", func(t *testing.T) {
		rec.take()
		p := goodHost().env("NCCL_SOCKET_IFNAME", "net1").with(func(p *corev1.Pod) { p.Name = "host-warn-0" }).pod()
		if _, err := wcs.CoreV1().Pods(testNS).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got := strings.Join(rec.take(), "\n")
		if !strings.Contains(got, "RDMA073") {
			t.Errorf("warnings %q lack RDMA073", got)
		}
	})

	t.Run("kube-system pods are never sent to the webhooks", func(t *testing.T) {
		// The mutating webhook would deny this pod (its NAD does not exist).
		p, err := cs.CoreV1().Pods("kube-system").Create(ctx, newPod("system-0").ann(AnnotationNetwork, "nope").with(func(p *corev1.Pod) { p.Namespace = "kube-system" }).pod(), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("kube-system pod: %v", err)
		}
		if len(p.Spec.Containers[0].Env) > 0 || p.Spec.Affinity != nil {
			t.Errorf("kube-system pod was mutated: %+v", p.Spec)
		}
	})

	t.Run("server stopped, failurePolicy Ignore: pod admitted", func(t *testing.T) {
		stopMgr()
		if err := <-mgrDone; err != nil {
			t.Fatalf("manager: %v", err)
		}
		mgrDone <- nil // for the deferred stop
		eventually(t, 30*time.Second, "webhook server stopped", func() error {
			conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
			if err == nil {
				conn.Close()
				return errors.New("still listening")
			}
			return nil
		})
		// With the default validating failurePolicy Fail, the pod is refused.
		p := newPod("while-down").ann(AnnotationNetwork, "face-training-rdma").pod()
		if _, err := cs.CoreV1().Pods(testNS).Create(ctx, p, dry); err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
			t.Fatalf("validating Fail with the server down: %v, want failed calling webhook", err)
		}
		// Pods that cannot be RDMA pods are not sent (match condition
		// rdma-candidate), so they are admitted even with Fail; a GPU job
		// too.
		for _, plain := range []*corev1.Pod{newPod("web-while-down").pod(), newPod("gpu-while-down").limit("nvidia.com/gpu", "8").pod()} {
			if _, err := cs.CoreV1().Pods(testNS).Create(ctx, plain, dry); err != nil {
				t.Errorf("pod %s with the server down: %v, want admitted (not an RDMA candidate)", plain.Name, err)
			}
		}
		// Every kind of RDMA candidate is sent, and refused.
		candidates := []*corev1.Pod{
			newPod("vf-while-down").limit("example.com/sriov_rdma", "1").pod(),
			newPod("shared-while-down").limit("rdma/hca_shared_devices_a", "1").pod(),
			newPod("init-while-down").with(func(p *corev1.Pod) {
				p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"example.com/MLNX_SRIOV": resource.MustParse("1")}}}}
			}).pod(),
			newPod("host-while-down").with(func(p *corev1.Pod) { p.Spec.HostNetwork = true }).pod(),
			newPod("multus-while-down").ann(NetworksAnnotation, "face-training-rdma").pod(),
		}
		for _, c := range candidates {
			if _, err := cs.CoreV1().Pods(testNS).Create(ctx, c, dry); err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
				t.Errorf("RDMA candidate %s with the server down: %v, want failed calling webhook", c.Name, err)
			}
		}
		v, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "rdmanet-test", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ignore := admissionregistrationv1.Ignore
		v.Webhooks[0].FailurePolicy = &ignore
		if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, v, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		var got *corev1.Pod
		eventually(t, 30*time.Second, "pod admitted with Ignore", func() error {
			got, err = cs.CoreV1().Pods(testNS).Create(ctx, p, metav1.CreateOptions{})
			return err
		})
		if len(got.Spec.Containers[0].Env) > 0 {
			t.Errorf("pod admitted while the server was down carries a mutation: %+v", got.Spec.Containers[0])
		}
	})
}
