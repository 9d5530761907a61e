package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Manager keeps the certificate Secret, the files in CertDir and the
// caBundle fields in step. Every replica runs one; they share the Secret.
type Manager struct {
	Config
	SecretName string
	// ConfigurationName names the Mutating- and ValidatingWebhookConfiguration.
	ConfigurationName string
	CertDir           string
	Resync            time.Duration
	// Reader reads live from the API server (no cache: the controller is
	// allowed to read one Secret, not to watch them all).
	Reader client.Reader
	Writer client.Writer
	Log    logr.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// ServingAddr, when set, is the webhook server's host:port: ReadyCheck
	// then also asks it for its certificate, since the server reloads the
	// files in CertDir on its own schedule (controller-runtime's
	// certwatcher) and until then still presents the placeholder.
	ServingAddr string

	ready   atomic.Bool
	written atomic.Pointer[[]byte] // DER of the serving certificate last written
}

// ReadyCheck is a healthz.Checker: ready once the serving certificate of
// the Secret is in CertDir and, with ServingAddr, the webhook server
// presents it, so that a Service sends the API server's calls only to
// replicas past the placeholder (whose CA has the same name as the real
// one: the API server's error would be "ECDSA verification failure").
func (m *Manager) ReadyCheck(_ *http.Request) error {
	if !m.ready.Load() {
		return errors.New("webhook certificates not written yet")
	}
	want := m.written.Load()
	if m.ServingAddr == "" || want == nil {
		return nil
	}
	// Only the presented certificate's bytes are compared with the one
	// written, so the chain is not verified here.
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", m.ServingAddr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // compared byte for byte below
	if err != nil {
		return fmt.Errorf("webhook server %s: %w", m.ServingAddr, err)
	}
	defer conn.Close()
	peer := conn.ConnectionState().PeerCertificates
	if len(peer) == 0 || !bytes.Equal(peer[0].Raw, *want) {
		return fmt.Errorf("webhook server %s still presents an older certificate than the Secret's (it reloads %s on its own schedule)", m.ServingAddr, m.CertDir)
	}
	return nil
}

// NeedLeaderElection: every replica serves webhooks and needs the files.
func (m *Manager) NeedLeaderElection() bool { return false }

// Start ensures the certificates once, then every Resync, until ctx ends.
// Failures are logged and retried on the next tick (a minute after a
// failure); they do not stop the manager.
func (m *Manager) Start(ctx context.Context) error {
	for {
		wait := m.Resync
		if err := m.Ensure(ctx); err != nil {
			m.Log.Error(err, "webhook certificates")
			if wait > time.Minute {
				wait = time.Minute
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

func (m *Manager) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// Ensure makes the Secret hold a valid bundle (creating or renewing it),
// patches the CA bundle into the webhook configurations, then writes the
// serving certificate into CertDir — in that order, so that the API server
// trusts a new CA before any replica serves a certificate of it.
func (m *Manager) Ensure(ctx context.Context) error {
	b, err := m.EnsureSecret(ctx)
	if err != nil {
		return err
	}
	if err := m.PatchCABundle(ctx, b.CABundle); err != nil {
		return err
	}
	if err := WriteFiles(m.CertDir, b); err != nil {
		return err
	}
	cert, err := b.ServingCert()
	if err != nil {
		return err
	}
	m.written.Store(&cert.Raw)
	m.ready.Store(true)
	return nil
}

// EnsureSecret returns the bundle of the Secret, creating it when missing
// and renewing it when invalid or due. Replicas racing to create or renew
// it converge on the first write: AlreadyExists and Conflict make the loser
// read the winner's bundle.
func (m *Manager) EnsureSecret(ctx context.Context) (*Bundle, error) {
	key := types.NamespacedName{Namespace: m.Namespace, Name: m.SecretName}
	for attempt := 0; attempt < 5; attempt++ {
		var s corev1.Secret
		err := m.Reader.Get(ctx, key, &s)
		switch {
		case apierrors.IsNotFound(err):
			b, err := Generate(m.Config, m.now())
			if err != nil {
				return nil, err
			}
			s = corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.SecretName, Labels: map[string]string{"app.kubernetes.io/managed-by": "rdmanet-controller"}},
				Type:       corev1.SecretTypeOpaque,
				Data:       b.Data(),
			}
			err = m.Writer.Create(ctx, &s)
			if apierrors.IsAlreadyExists(err) {
				continue // another replica won; read its bundle
			}
			if err != nil {
				return nil, fmt.Errorf("create Secret %s: %w (the controller needs create on secrets in %s)", key, err, m.Namespace)
			}
			m.Log.Info("created webhook certificate Secret", "secret", key.String())
			return b, nil
		case err != nil:
			return nil, fmt.Errorf("read Secret %s: %w (the controller needs get on secrets in %s)", key, err, m.Namespace)
		}
		old := FromData(s.Data)
		b, reason, err := Renew(m.Config, old, m.now())
		if err != nil {
			return nil, err
		}
		if reason == "" {
			return old, nil
		}
		s.Data = b.Data()
		err = m.Writer.Update(ctx, &s)
		if apierrors.IsConflict(err) {
			continue // another replica renewed it; check theirs
		}
		if err != nil {
			return nil, fmt.Errorf("update Secret %s: %w (the controller needs update on secrets in %s)", key, err, m.Namespace)
		}
		m.Log.Info("renewed webhook certificates", "secret", key.String(), "reason", reason)
		return b, nil
	}
	return nil, fmt.Errorf("Secret %s/%s: gave up after 5 conflicting writes by other replicas", m.Namespace, m.SecretName)
}

// PatchCABundle sets caBundle on the webhooks of the Mutating- and
// ValidatingWebhookConfiguration ConfigurationName whose clientConfig.service
// is our Service; other webhooks and fields are left alone. A missing
// configuration is not an error (it may be installed later; the next
// resync patches it).
func (m *Manager) PatchCABundle(ctx context.Context, bundle []byte) error {
	for _, c := range []struct {
		kind   string
		newObj func() client.Object
	}{
		{"MutatingWebhookConfiguration", func() client.Object { return &admissionregistrationv1.MutatingWebhookConfiguration{} }},
		{"ValidatingWebhookConfiguration", func() client.Object { return &admissionregistrationv1.ValidatingWebhookConfiguration{} }},
	} {
		if err := m.patchCABundle(ctx, c.kind, c.newObj, bundle); err != nil {
			return err
		}
	}
	return nil
}

// patchCABundle sets bundle on the webhooks of one configuration (a fresh
// object per try, so a conflict's retry starts from the server's copy).
func (m *Manager) patchCABundle(ctx context.Context, kind string, newObj func() client.Object, bundle []byte) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj := newObj()
		if err := m.Reader.Get(ctx, types.NamespacedName{Name: m.ConfigurationName}, obj); err != nil {
			return client.IgnoreNotFound(err)
		}
		changed := false
		for _, cc := range clientConfigs(obj) {
			if s := cc.Service; s != nil && s.Name == m.Service && s.Namespace == m.Namespace && !bytes.Equal(cc.CABundle, bundle) {
				cc.CABundle, changed = bundle, true
			}
		}
		if !changed {
			return nil
		}
		return m.Writer.Update(ctx, obj)
	})
	if err != nil {
		return fmt.Errorf("patch caBundle of %s %s: %w (the controller needs get and update on it)", kind, m.ConfigurationName, err)
	}
	return nil
}

// clientConfigs points at the clientConfig of every webhook of a Mutating-
// or ValidatingWebhookConfiguration.
func clientConfigs(obj client.Object) []*admissionregistrationv1.WebhookClientConfig {
	var out []*admissionregistrationv1.WebhookClientConfig
	switch c := obj.(type) {
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for i := range c.Webhooks {
			out = append(out, &c.Webhooks[i].ClientConfig)
		}
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for i := range c.Webhooks {
			out = append(out, &c.Webhooks[i].ClientConfig)
		}
	}
	return out
}

// WriteFiles writes tls.crt, tls.key and ca.crt into dir, each atomically
// (temporary file + rename) and only when its content changed, so the
// webhook server's certwatcher reloads once per renewal.
func WriteFiles(dir string, b *Bundle) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cert dir %s: %w", dir, err)
	}
	// Key before certificate: certwatcher reloads on either event and
	// needs the pair to match when it reads both.
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{{KeyKey, b.Key, 0o600}, {KeyCert, b.Cert, 0o644}, {KeyCACert, b.CABundle, 0o644}} {
		path := filepath.Join(dir, f.name)
		if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, f.data) {
			continue
		}
		tmp, err := os.CreateTemp(dir, "."+f.name+".*")
		if err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		_, werr := tmp.Write(f.data)
		cerr := tmp.Close()
		if werr == nil {
			werr = cerr
		}
		if werr == nil {
			werr = os.Chmod(tmp.Name(), f.mode)
		}
		if werr == nil {
			werr = os.Rename(tmp.Name(), path)
		}
		if werr != nil {
			os.Remove(tmp.Name())
			return fmt.Errorf("write %s: %w", path, werr)
		}
	}
	return nil
}

// WritePlaceholder writes a short-lived self-signed pair into dir when it
// holds no readable pair yet, so that controller-runtime's webhook server
// (which starts before any other runnable and fails without files) can
// start; Manager replaces it with the real certificate within its first
// Ensure. Until then the API server does not trust the server and applies
// each webhook's failurePolicy.
func WritePlaceholder(dir string, c Config, now time.Time) error {
	cur := &Bundle{}
	cur.Cert, _ = os.ReadFile(filepath.Join(dir, KeyCert))
	cur.Key, _ = os.ReadFile(filepath.Join(dir, KeyKey))
	if _, err := parseCert(cur.Cert, KeyCert); err == nil {
		if _, err := parseKey(cur.Key, KeyKey); err == nil {
			return nil
		}
	}
	c.CALifetime, c.CertLifetime = time.Hour, time.Hour
	b, err := Generate(c, now)
	if err != nil {
		return err
	}
	b.CABundle = b.CACert
	return WriteFiles(dir, b)
}
