package controller_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rdmanet/rdmanet/internal/controller"
	"github.com/rdmanet/rdmanet/internal/webhook"
)

// TestWebhooksServed: with Options.Webhooks (the binary's default) the
// manager serves both admission paths over TLS on WebhookPort, with the
// key pair the certificate manager keeps in its Secret and writes to
// CertDir. (The API server calling them is internal/webhook's
// TestWebhooksAgainstAPIServer.)
func TestWebhooksServed(t *testing.T) {
	e := setup(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	certDir := t.TempDir()
	start(t, e, "webhooks", func(o *controller.Options) {
		o.Webhooks, o.WebhookPort, o.CertDir, o.ManageCerts = true, port, certDir, true
	})

	// The Secret's pair reaches CertDir (the placeholder is replaced).
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := e.admin.CoreV1().Secrets(controller.DefaultNamespace).Get(ctx, webhook.DefaultSecretName, metav1.GetOptions{})
		if err == nil {
			onDisk, _ := os.ReadFile(filepath.Join(certDir, "tls.crt"))
			if len(s.Data["tls.crt"]) > 0 && bytes.Equal(onDisk, s.Data["tls.crt"]) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Secret %s/%s not created or its tls.crt not in %s within 30 s (last error %v)", controller.DefaultNamespace, webhook.DefaultSecretName, certDir, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	pod := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"plain","namespace":"default"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		// The serving certificate names the Service, not 127.0.0.1.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // test client
	}}
	for _, path := range []string{webhook.MutatePath, webhook.ValidatePath} {
		t.Run(path, func(t *testing.T) {
			uid := types.UID("uid-" + path)
			review := admissionv1.AdmissionReview{
				TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
				Request: &admissionv1.AdmissionRequest{UID: uid, Operation: admissionv1.Create, Namespace: "default", Name: "plain",
					Kind:   metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
					Object: runtime.RawExtension{Raw: pod}},
			}
			body, _ := json.Marshal(review)
			var resp *http.Response
			deadline := time.Now().Add(30 * time.Second)
			for {
				resp, err = client.Post(fmt.Sprintf("https://127.0.0.1:%d%s", port, path), "application/json", bytes.NewReader(body))
				if err == nil || time.Now().After(deadline) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				t.Fatalf("POST %s: %v", path, err)
			}
			defer resp.Body.Close()
			var got admissionv1.AdmissionReview
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || got.Response == nil {
				t.Fatalf("POST %s: status %d, answer not an AdmissionReview (%v)", path, resp.StatusCode, err)
			}
			if got.Response.UID != uid || !got.Response.Allowed {
				t.Errorf("POST %s: response uid=%q allowed=%t, want uid %q allowed (a pod that does not opt in)", path, got.Response.UID, got.Response.Allowed, uid)
			}
		})
	}
}
