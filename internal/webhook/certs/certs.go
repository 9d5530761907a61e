// Package certs creates and renews the rdmanet-controller's webhook
// certificates without cert-manager: a self-signed CA and a serving
// certificate for <service>.<namespace>.svc, kept in a Secret shared by all
// replicas, written to the webhook server's CertDir (controller-runtime's
// certwatcher reloads it) and patched into the caBundle of the webhook
// configurations.
package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Secret data keys.
const (
	KeyCACert = "ca.crt"
	KeyCAKey  = "ca.key"
	KeyCert   = "tls.crt"
	KeyKey    = "tls.key"
	// KeyCABundle is the CA bundle clients trust: the current CA, plus the
	// previous one while it is still valid after a CA renewal, so that
	// replicas still serving a certificate of the old CA keep working.
	KeyCABundle = "ca-bundle.crt"
)

// Config names what the certificates are for.
type Config struct {
	Service, Namespace string
	ExtraSANs          []string
	CALifetime         time.Duration
	CertLifetime       time.Duration
}

// DNSNames of the serving certificate: the Service's in-cluster names plus
// the DNS entries of ExtraSANs.
func (c Config) DNSNames() []string {
	out := []string{c.Service + "." + c.Namespace + ".svc", c.Service + "." + c.Namespace + ".svc.cluster.local"}
	for _, s := range c.ExtraSANs {
		if net.ParseIP(s) == nil {
			out = append(out, s)
		}
	}
	return out
}

func (c Config) ips() []net.IP {
	var out []net.IP
	for _, s := range c.ExtraSANs {
		if ip := net.ParseIP(s); ip != nil {
			out = append(out, ip)
		}
	}
	return out
}

// Bundle is the PEM content of the Secret.
type Bundle struct {
	CACert, CAKey, Cert, Key, CABundle []byte
}

// Data is the Secret data of the bundle.
func (b *Bundle) Data() map[string][]byte {
	return map[string][]byte{KeyCACert: b.CACert, KeyCAKey: b.CAKey, KeyCert: b.Cert, KeyKey: b.Key, KeyCABundle: b.CABundle}
}

// FromData reads a bundle from Secret data (missing keys stay empty).
func FromData(d map[string][]byte) *Bundle {
	return &Bundle{CACert: d[KeyCACert], CAKey: d[KeyCAKey], Cert: d[KeyCert], Key: d[KeyKey], CABundle: d[KeyCABundle]}
}

// Equal compares two bundles byte by byte.
func (b *Bundle) Equal(o *Bundle) bool {
	return o != nil && bytes.Equal(b.CACert, o.CACert) && bytes.Equal(b.CAKey, o.CAKey) && bytes.Equal(b.Cert, o.Cert) && bytes.Equal(b.Key, o.Key) && bytes.Equal(b.CABundle, o.CABundle)
}

// Generate creates a new CA and a serving certificate signed by it.
func Generate(c Config, now time.Time) (*Bundle, error) {
	caCert, caKey, caDER, err := newCA(c, now)
	if err != nil {
		return nil, err
	}
	b := &Bundle{CACert: pemCert(caDER), CAKey: caKey}
	b.CABundle = b.CACert
	if err := b.issue(c, now, caCert); err != nil {
		return nil, err
	}
	return b, nil
}

// Renew returns the bundle to store: old itself when it is valid for c at
// now and not due; else a bundle with a new serving certificate (the CA is
// kept while less than 2/3 of its lifetime has passed, else renewed, with
// the old CA left in the CA bundle until it expires). reason says why
// (empty when nothing changed).
func Renew(c Config, old *Bundle, now time.Time) (b *Bundle, reason string, err error) {
	caCert, caErr := old.ca(now)
	if caErr == nil && dueAt(caCert, now) {
		caErr = fmt.Errorf("the CA is past 2/3 of its lifetime (expires %s)", caCert.NotAfter.UTC().Format(time.RFC3339))
	}
	if caErr != nil {
		nb, err := Generate(c, now)
		if err != nil {
			return nil, "", err
		}
		if caCert != nil && now.Before(caCert.NotAfter) {
			nb.CABundle = append(append([]byte{}, nb.CACert...), old.CACert...)
		}
		return nb, "new CA: " + caErr.Error(), nil
	}
	err = old.checkServing(c, now, caCert)
	if err == nil {
		return old, "", nil
	}
	reason = "new serving certificate: " + err.Error()
	nb := &Bundle{CACert: old.CACert, CAKey: old.CAKey, CABundle: old.CABundle}
	if len(nb.CABundle) == 0 {
		nb.CABundle = nb.CACert
	}
	if err := nb.issue(c, now, caCert); err != nil {
		return nil, "", err
	}
	return nb, reason, nil
}

// Check tells whether the bundle is valid for c at now and not yet due for
// renewal (nil), or why not.
func (b *Bundle) Check(c Config, now time.Time) error {
	caCert, err := b.ca(now)
	if err != nil {
		return err
	}
	if dueAt(caCert, now) {
		return errors.New("the CA is past 2/3 of its lifetime")
	}
	return b.checkServing(c, now, caCert)
}

// ServingCert parses the serving certificate.
func (b *Bundle) ServingCert() (*x509.Certificate, error) { return parseCert(b.Cert, KeyCert) }

func (b *Bundle) ca(now time.Time) (*x509.Certificate, error) {
	caCert, err := parseCert(b.CACert, KeyCACert)
	if err != nil {
		return nil, err
	}
	if _, err := parseKey(b.CAKey, KeyCAKey); err != nil {
		return caCert, err
	}
	if !caCert.IsCA {
		return caCert, fmt.Errorf("%s is not a CA certificate", KeyCACert)
	}
	if !now.Before(caCert.NotAfter) {
		return caCert, fmt.Errorf("the CA expired at %s", caCert.NotAfter.UTC().Format(time.RFC3339))
	}
	return caCert, nil
}

func (b *Bundle) checkServing(c Config, now time.Time, caCert *x509.Certificate) error {
	cert, err := parseCert(b.Cert, KeyCert)
	if err != nil {
		return err
	}
	key, err := parseKey(b.Key, KeyKey)
	if err != nil {
		return err
	}
	if pub, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || !pub.Equal(key.Public()) {
		return fmt.Errorf("%s does not belong to %s", KeyKey, KeyCert)
	}
	if err := cert.CheckSignatureFrom(caCert); err != nil {
		return fmt.Errorf("%s is not signed by %s: %w", KeyCert, KeyCACert, err)
	}
	for _, n := range c.DNSNames() {
		if err := cert.VerifyHostname(n); err != nil {
			return fmt.Errorf("%s does not cover %s", KeyCert, n)
		}
	}
	for _, ip := range c.ips() {
		if err := cert.VerifyHostname(ip.String()); err != nil {
			return fmt.Errorf("%s does not cover %s", KeyCert, ip)
		}
	}
	if !now.Before(cert.NotAfter) {
		return fmt.Errorf("%s expired at %s", KeyCert, cert.NotAfter.UTC().Format(time.RFC3339))
	}
	if dueAt(cert, now) {
		return fmt.Errorf("%s is past 2/3 of its lifetime (expires %s)", KeyCert, cert.NotAfter.UTC().Format(time.RFC3339))
	}
	if !bytes.Contains(b.CABundle, b.CACert) {
		return fmt.Errorf("%s does not contain %s", KeyCABundle, KeyCACert)
	}
	return nil
}

// RenewAt is when a certificate is due: 2/3 of its lifetime.
func RenewAt(cert *x509.Certificate) time.Time {
	life := cert.NotAfter.Sub(cert.NotBefore)
	return cert.NotBefore.Add(life * 2 / 3)
}

func dueAt(cert *x509.Certificate, now time.Time) bool { return !now.Before(RenewAt(cert)) }

func newCA(c Config, now time.Time) (*x509.Certificate, []byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("generate CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "rdmanet-webhook-ca " + c.Namespace + "/" + c.Service, Organization: []string{"rdmanet"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(c.CALifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("self-sign CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, err
	}
	kp, err := pemKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return cert, kp, der, nil
}

func (b *Bundle) issue(c Config, now time.Time, caCert *x509.Certificate) error {
	caKey, err := parseKey(b.CAKey, KeyCAKey)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate serving key: %w", err)
	}
	notAfter := now.Add(c.CertLifetime)
	if notAfter.After(caCert.NotAfter) {
		notAfter = caCert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: c.Service + "." + c.Namespace + ".svc", Organization: []string{"rdmanet"}},
		DNSNames:     c.DNSNames(),
		IPAddresses:  c.ips(),
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("sign serving certificate: %w", err)
	}
	kp, err := pemKey(key)
	if err != nil {
		return err
	}
	b.Cert, b.Key = pemCert(der), kp
	return nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return n
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func pemKey(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func parseCert(p []byte, name string) (*x509.Certificate, error) {
	if len(p) == 0 {
		return nil, fmt.Errorf("%s is missing", name)
	}
	blk, _ := pem.Decode(p)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s is not a PEM certificate", name)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

func parseKey(p []byte, name string) (*ecdsa.PrivateKey, error) {
	if len(p) == 0 {
		return nil, fmt.Errorf("%s is missing", name)
	}
	blk, _ := pem.Decode(p)
	if blk == nil || blk.Type != "EC PRIVATE KEY" {
		return nil, fmt.Errorf("%s is not a PEM EC private key", name)
	}
	k, err := x509.ParseECPrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return k, nil
}
