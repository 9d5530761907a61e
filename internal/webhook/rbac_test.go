package webhook

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rdmanet/rdmanet/internal/webhook/certs"
	"github.com/rdmanet/rdmanet/test/apiserver"
)

const controllerSA = "system:serviceaccount:rdmanet-system:rdmanet-controller"

// applyRBAC creates the objects of deploy/controller/rbac.yaml.
func applyRBAC(ctx context.Context, t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	if err := apiserver.ApplyRBACFile(ctx, cs, "deploy/controller/rbac.yaml"); err != nil {
		t.Fatal(err)
	}
}

// TestRBACAgainstAPIServer runs the certificate manager and the NAD lookup
// with no more rights than deploy/controller/rbac.yaml grants.
func TestRBACAgainstAPIServer(t *testing.T) {
	srv := apiserver.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := srv.Config()
	cs := kubernetes.NewForConfigOrDie(cfg)
	for _, ns := range []string{testNS, DefaultNamespace} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	nadRes := NADGVK.GroupVersion().WithResource("network-attachment-definitions")
	if _, err := dynamic.NewForConfigOrDie(cfg).Resource(nadRes).Namespace(testNS).Create(ctx, nadU("face-training-rdma", "example.com/sriov_rdma", sriovConfig), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	applyRBAC(ctx, t, cs)

	// Service-backed configurations with a stale caBundle, and no Secret.
	m, v, err := Configurations(ConfigOptions{NamespaceSelector: neverSelector, MutatingFailurePolicy: admissionregistrationv1.Ignore, ValidatingFailurePolicy: admissionregistrationv1.Ignore, CABundle: []byte("stale")})
	if err != nil {
		t.Fatal(err)
	}
	if cur, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, m.Name, metav1.GetOptions{}); err == nil {
		cur.Webhooks = m.Webhooks
		_, err = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, cur, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	} else if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, m, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if cur, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, v.Name, metav1.GetOptions{}); err == nil {
		cur.Webhooks = v.Webhooks
		_, err = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, cur, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	} else if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, v, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Secrets(DefaultNamespace).Delete(ctx, DefaultSecretName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}

	imp := rest.CopyConfig(cfg)
	imp.Impersonate = rest.ImpersonationConfig{UserName: controllerSA}
	c, err := client.New(imp, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	o := Options{ManageCerts: true, CertDir: t.TempDir()}.Default()
	cm := &certs.Manager{
		Config:     certs.Config{Service: o.ServiceName, Namespace: o.Namespace, CALifetime: o.CALifetime, CertLifetime: o.CertLifetime},
		SecretName: o.SecretName, ConfigurationName: o.ConfigurationName, CertDir: o.CertDir, Resync: o.Resync,
		Reader: c, Writer: c, Log: logr.Discard(),
	}
	tests := []struct {
		name string
		run  func() error
	}{
		{name: "create the Secret, patch caBundle, write files", run: func() error { return cm.Ensure(ctx) }},
		{name: "second replica reads the Secret", run: func() error { return cm.Ensure(ctx) }},
		{name: "caBundle is the Secret's", run: func() error {
			s, err := cs.CoreV1().Secrets(DefaultNamespace).Get(ctx, DefaultSecretName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			gm, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, DefaultConfigurationName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			gv, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, DefaultConfigurationName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !bytes.Equal(gm.Webhooks[0].ClientConfig.CABundle, s.Data[certs.KeyCABundle]) || !bytes.Equal(gv.Webhooks[0].ClientConfig.CABundle, s.Data[certs.KeyCABundle]) {
				return errors.New("caBundle not patched")
			}
			return nil
		}},
		{name: "NAD lookup of the webhooks", run: func() error {
			n, err := getNAD(ctx, c, NetworkRef{Namespace: testNS, Name: "face-training-rdma"})
			if err == nil && n == nil {
				err = errors.New("NAD not found")
			}
			return err
		}},
		{name: "no other Secret is readable", run: func() error {
			var s corev1.Secret
			err := c.Get(ctx, types.NamespacedName{Namespace: DefaultNamespace, Name: "something-else"}, &s)
			if !apierrors.IsForbidden(err) {
				return errors.New("want Forbidden, got " + errString(err))
			}
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// RBAC objects reach the authorizer's cache asynchronously.
			eventually(t, 20*time.Second, tt.name, tt.run)
		})
	}
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}
