package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func newManager(c client.Client, dir string, now time.Time) *Manager {
	return &Manager{Config: testConfig(), SecretName: "webhook-certs", ConfigurationName: "rdmanet-controller", CertDir: dir,
		Resync: time.Minute, Reader: c, Writer: c, Log: logr.Discard(), Now: func() time.Time { return now }}
}

func TestEnsureSecretReplicasConverge(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).Build()
	ctx := context.Background()
	const replicas = 6
	got := make([]*Bundle, replicas)
	var wg sync.WaitGroup
	for i := 0; i < replicas; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			b, err := newManager(c, t.TempDir(), t0).EnsureSecret(ctx)
			if err != nil {
				t.Errorf("replica %d: %v", i, err)
				return
			}
			got[i] = b
		}(i)
	}
	wg.Wait()
	var s corev1.Secret
	if err := c.Get(ctx, types.NamespacedName{Namespace: "rdmanet-system", Name: "webhook-certs"}, &s); err != nil {
		t.Fatal(err)
	}
	stored := FromData(s.Data)
	for i, b := range got {
		if b == nil || !b.Equal(stored) {
			t.Errorf("replica %d uses a bundle other than the stored one", i)
		}
	}
	// Renewal after 2/3 of the serving lifetime: all replicas again end
	// with the one stored bundle, and its CA is kept.
	later := t0.Add(21 * 24 * time.Hour)
	for i := 0; i < replicas; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			b, err := newManager(c, t.TempDir(), later).EnsureSecret(ctx)
			if err != nil {
				t.Errorf("replica %d: %v", i, err)
				return
			}
			got[i] = b
		}(i)
	}
	wg.Wait()
	if err := c.Get(ctx, types.NamespacedName{Namespace: "rdmanet-system", Name: "webhook-certs"}, &s); err != nil {
		t.Fatal(err)
	}
	renewed := FromData(s.Data)
	if bytes.Equal(renewed.Cert, stored.Cert) || !bytes.Equal(renewed.CACert, stored.CACert) {
		t.Error("want a new serving certificate under the same CA")
	}
	for i, b := range got {
		if b == nil || !b.Equal(renewed) {
			t.Errorf("replica %d uses a bundle other than the renewed one", i)
		}
	}
}

func TestPatchCABundle(t *testing.T) {
	ctx := context.Background()
	svc := func(ns, name string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: ns, Name: name}, CABundle: []byte("old")}
	}
	url := "https://127.0.0.1:9443/x"
	none := admissionregistrationv1.SideEffectClassNone
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "rdmanet-controller"}, Webhooks: []admissionregistrationv1.MutatingWebhook{
		{Name: "ours.rdmanet.io", ClientConfig: svc("rdmanet-system", "rdmanet-controller"), SideEffects: &none},
		{Name: "other-service.rdmanet.io", ClientConfig: svc("rdmanet-system", "someone-else"), SideEffects: &none},
		{Name: "url.rdmanet.io", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: []byte("old")}, SideEffects: &none},
	}}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "rdmanet-controller"}, Webhooks: []admissionregistrationv1.ValidatingWebhook{
		{Name: "ours.rdmanet.io", ClientConfig: svc("rdmanet-system", "rdmanet-controller"), SideEffects: &none},
		{Name: "other-namespace.rdmanet.io", ClientConfig: svc("default", "rdmanet-controller"), SideEffects: &none},
	}}
	unrelated := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "someone-else"}, Webhooks: []admissionregistrationv1.ValidatingWebhook{
		{Name: "ours.rdmanet.io", ClientConfig: svc("rdmanet-system", "rdmanet-controller"), SideEffects: &none},
	}}
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(mwc, vwc, unrelated).Build()
	m := newManager(c, t.TempDir(), t0)
	if err := m.PatchCABundle(ctx, []byte("NEW")); err != nil {
		t.Fatal(err)
	}
	var gm admissionregistrationv1.MutatingWebhookConfiguration
	var gv, gu admissionregistrationv1.ValidatingWebhookConfiguration
	_ = c.Get(ctx, types.NamespacedName{Name: "rdmanet-controller"}, &gm)
	_ = c.Get(ctx, types.NamespacedName{Name: "rdmanet-controller"}, &gv)
	_ = c.Get(ctx, types.NamespacedName{Name: "someone-else"}, &gu)
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{name: "mutating, our service", got: gm.Webhooks[0].ClientConfig.CABundle, want: "NEW"},
		{name: "mutating, another service", got: gm.Webhooks[1].ClientConfig.CABundle, want: "old"},
		{name: "mutating, URL", got: gm.Webhooks[2].ClientConfig.CABundle, want: "old"},
		{name: "validating, our service", got: gv.Webhooks[0].ClientConfig.CABundle, want: "NEW"},
		{name: "validating, same name other namespace", got: gv.Webhooks[1].ClientConfig.CABundle, want: "old"},
		{name: "another configuration", got: gu.Webhooks[0].ClientConfig.CABundle, want: "old"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if string(tt.got) != tt.want {
				t.Errorf("caBundle = %q, want %q", tt.got, tt.want)
			}
		})
	}
	// Missing configurations are not an error (installed later).
	empty := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).Build()
	if err := newManager(empty, t.TempDir(), t0).PatchCABundle(ctx, []byte("x")); err != nil {
		t.Errorf("missing configurations: %v", err)
	}
}

func TestEnsureWritesFiles(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).Build()
	dir := filepath.Join(t.TempDir(), "serving-certs")
	m := newManager(c, dir, t0)
	if err := m.ReadyCheck(nil); err == nil {
		t.Error("ready before the first Ensure")
	}
	if err := m.Ensure(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := m.ReadyCheck(nil); err != nil {
		t.Errorf("not ready after Ensure: %v", err)
	}
	b, err := m.EnsureSecret(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tlsPair(dir); err != nil {
		t.Fatal(err)
	}
	got, _ := readFile(filepath.Join(dir, KeyCert))
	if !bytes.Equal(got, b.Cert) {
		t.Error("tls.crt in the cert dir is not the Secret's")
	}
}

// TestReadyCheckWaitsForServedCert: with ServingAddr, a replica is ready
// only once its webhook server presents the certificate Ensure wrote, not
// while it still serves the placeholder (same CA name, other key: the API
// server would refuse it), nor while the server does not answer.
func TestReadyCheckWaitsForServedCert(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).Build()
	dir := filepath.Join(t.TempDir(), "serving-certs")
	placeholder := filepath.Join(t.TempDir(), "placeholder")
	m := newManager(c, dir, t0)
	if err := WritePlaceholder(placeholder, m.Config, t0); err != nil {
		t.Fatal(err)
	}
	if err := m.Ensure(context.Background()); err != nil {
		t.Fatal(err)
	}
	var served atomic.Pointer[tls.Certificate]
	load := func(d string) {
		t.Helper()
		pair, err := tls.LoadX509KeyPair(filepath.Join(d, KeyCert), filepath.Join(d, KeyKey))
		if err != nil {
			t.Fatal(err)
		}
		served.Store(&pair)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return served.Load(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = conn.(*tls.Conn).Handshake(); _ = conn.Close() }()
		}
	}()
	m.ServingAddr = ln.Addr().String()

	load(placeholder)
	if err := m.ReadyCheck(nil); err == nil || !strings.Contains(err.Error(), "still presents an older certificate") {
		t.Errorf("serving the placeholder: ReadyCheck = %v, want not ready", err)
	}
	load(dir) // the server reloaded the files
	if err := m.ReadyCheck(nil); err != nil {
		t.Errorf("serving the Secret's certificate: ReadyCheck = %v, want ready", err)
	}
	_ = ln.Close()
	if err := m.ReadyCheck(nil); err == nil {
		t.Error("server down: ready")
	}
}
