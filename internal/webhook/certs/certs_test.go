package certs

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func testConfig() Config {
	return Config{Service: "rdmanet-controller", Namespace: "rdmanet-system", ExtraSANs: []string{"127.0.0.1", "webhook.example.com"},
		CALifetime: 300 * 24 * time.Hour, CertLifetime: 30 * 24 * time.Hour}
}

func TestGenerate(t *testing.T) {
	c := testConfig()
	b, err := Generate(c, t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Check(c, t0); err != nil {
		t.Fatalf("fresh bundle: %v", err)
	}
	pair, err := tls.X509KeyPair(b.Cert, b.Key)
	if err != nil {
		t.Fatalf("serving pair: %v", err)
	}
	leaf, _ := x509.ParseCertificate(pair.Certificate[0])
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b.CABundle) {
		t.Fatal("CA bundle has no certificate")
	}
	for _, name := range []string{"rdmanet-controller.rdmanet-system.svc", "rdmanet-controller.rdmanet-system.svc.cluster.local", "127.0.0.1", "webhook.example.com"} {
		t.Run(name, func(t *testing.T) {
			if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: pool, CurrentTime: t0.Add(time.Hour)}); err != nil {
				t.Errorf("verify for %s: %v", name, err)
			}
		})
	}
	if got := leaf.NotAfter.Sub(t0); got != c.CertLifetime {
		t.Errorf("serving lifetime %s, want %s", got, c.CertLifetime)
	}
}

func TestRenew(t *testing.T) {
	c := testConfig()
	orig, err := Generate(c, t0)
	if err != nil {
		t.Fatal(err)
	}
	serving, _ := orig.ServingCert()
	tests := []struct {
		name      string
		bundle    func() *Bundle
		config    func() Config
		at        time.Time
		reason    string // "" = unchanged
		sameCA    bool
		oldCAKept bool // old CA still in the CA bundle
	}{
		{name: "valid: unchanged", at: t0.Add(24 * time.Hour)},
		{name: "just before 2/3 of the serving lifetime: unchanged", at: RenewAt(serving).Add(-time.Second)},
		{name: "at 2/3 of the serving lifetime: new serving certificate, same CA", at: RenewAt(serving), reason: "new serving certificate: tls.crt is past 2/3", sameCA: true},
		{name: "expired serving certificate", at: serving.NotAfter.Add(time.Hour), reason: "new serving certificate: tls.crt expired", sameCA: true},
		{name: "service renamed: new serving certificate", at: t0.Add(time.Hour), config: func() Config { c := testConfig(); c.Service = "other"; return c }, reason: "does not cover other.rdmanet-system.svc", sameCA: true},
		{name: "corrupt key", at: t0.Add(time.Hour), bundle: func() *Bundle { b := *orig; b.Key = []byte("junk"); return &b }, reason: "tls.key is not a PEM EC private key", sameCA: true},
		{name: "key of another pair", at: t0.Add(time.Hour), bundle: func() *Bundle {
			other, _ := Generate(c, t0)
			b := *orig
			b.Key = other.Key
			return &b
		}, reason: "tls.key does not belong to tls.crt", sameCA: true},
		{name: "CA past 2/3: new CA, old one kept in the bundle", at: t0.Add(201 * 24 * time.Hour), reason: "new CA: the CA is past 2/3", oldCAKept: true},
		{name: "CA expired: new CA alone", at: t0.Add(301 * 24 * time.Hour), reason: "new CA: the CA expired"},
		{name: "empty Secret", at: t0, bundle: func() *Bundle { return &Bundle{} }, reason: "new CA: ca.crt is missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := orig
			if tt.bundle != nil {
				old = tt.bundle()
			}
			cfg := c
			if tt.config != nil {
				cfg = tt.config()
			}
			b, reason, err := Renew(cfg, old, tt.at)
			if err != nil {
				t.Fatal(err)
			}
			if tt.reason == "" {
				if reason != "" || !b.Equal(old) {
					t.Fatalf("renewed (%s), want unchanged", reason)
				}
				return
			}
			if !strings.Contains(reason, tt.reason) {
				t.Errorf("reason %q, want %q", reason, tt.reason)
			}
			if err := b.Check(cfg, tt.at); err != nil {
				t.Errorf("renewed bundle invalid: %v", err)
			}
			if got := bytes.Equal(b.CACert, old.CACert); got != tt.sameCA {
				t.Errorf("same CA = %v, want %v", got, tt.sameCA)
			}
			if got := len(old.CACert) > 0 && bytes.Contains(b.CABundle, old.CACert); got != (tt.sameCA || tt.oldCAKept) {
				t.Errorf("old CA in bundle = %v, want %v", got, tt.sameCA || tt.oldCAKept)
			}
			// Renewing the renewed bundle changes nothing.
			if again, r, _ := Renew(cfg, b, tt.at); r != "" || !again.Equal(b) {
				t.Errorf("second renewal changed the bundle: %s", r)
			}
		})
	}
}

func TestWriteFilesAndPlaceholder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	c := testConfig()
	if err := WritePlaceholder(dir, c, t0); err != nil {
		t.Fatal(err)
	}
	ph, err := os.ReadFile(filepath.Join(dir, KeyCert))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.LoadX509KeyPair(filepath.Join(dir, KeyCert), filepath.Join(dir, KeyKey)); err != nil {
		t.Fatalf("placeholder pair: %v", err)
	}
	// A second placeholder call keeps the existing pair.
	if err := WritePlaceholder(dir, c, t0); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, KeyCert)); !bytes.Equal(again, ph) {
		t.Error("WritePlaceholder replaced an existing pair")
	}
	b, _ := Generate(c, t0)
	if err := WriteFiles(dir, b); err != nil {
		t.Fatal(err)
	}
	st1, _ := os.Stat(filepath.Join(dir, KeyCert))
	for name, want := range map[string][]byte{KeyCert: b.Cert, KeyKey: b.Key, KeyCACert: b.CABundle} {
		got, _ := os.ReadFile(filepath.Join(dir, name))
		if !bytes.Equal(got, want) {
			t.Errorf("%s not written", name)
		}
	}
	if st, _ := os.Stat(filepath.Join(dir, KeyKey)); st.Mode().Perm() != 0o600 {
		t.Errorf("tls.key mode %v, want 0600", st.Mode().Perm())
	}
	// Unchanged content is not rewritten (no certwatcher event).
	if err := WriteFiles(dir, b); err != nil {
		t.Fatal(err)
	}
	st2, _ := os.Stat(filepath.Join(dir, KeyCert))
	if !os.SameFile(st1, st2) {
		t.Error("unchanged tls.crt was rewritten")
	}
	// The placeholder is not written over the real pair.
	if err := WritePlaceholder(dir, c, t0); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, KeyCert)); !bytes.Equal(got, b.Cert) {
		t.Error("placeholder replaced the real certificate")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Errorf("cert dir holds %d entries, want 3 (no temporary files left)", len(entries))
	}
}
