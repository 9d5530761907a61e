package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// identity is one client certificate the cluster's parts authenticate with.
type identity struct {
	file string // base name under pki/
	cn   string
	orgs []string
}

// identities are the cluster's: one kubelet identity per node
// (system:node:<name>, which the Node authorizer scopes to that node),
// kube-proxy's (system:kube-proxy: the built-in system:node-proxier
// binding) and CoreDNS's (bound to a read-only role by cluster-up).
func identities(nodes []Node) []identity {
	ids := []identity{
		{"admin", "rdmanet-cluster-admin", []string{"system:masters"}},
		{"kube-controller-manager", "system:kube-controller-manager", nil},
		{"kube-scheduler", "system:kube-scheduler", nil},
		{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}},
		{"kube-proxy", "system:kube-proxy", nil},
		{"coredns", CoreDNSUser, nil},
	}
	for _, n := range nodes {
		ids = append(ids, identity{kubeletIdentity(n), "system:node:" + n.Name, []string{"system:nodes"}})
	}
	return ids
}

// CoreDNSUser is CoreDNS's client certificate's user name.
const CoreDNSUser = "rdmanet-cluster:coredns"

// writePKI creates the cluster CA, the API server's serving certificate,
// one client certificate per identity, the service-account key pair, and a
// kubeconfig per identity (server https://NodeIP:APIPort, i.e. from inside
// the node). Existing files are kept: a second cluster-up reuses them.
func writePKI(l Layout, nodes []Node) error {
	dir := l.PKI()
	if _, err := os.Stat(filepath.Join(dir, "ca.crt")); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("CA key: %w", err)
	}
	now := time.Now().Add(-time.Hour)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "rdmanet-cluster-ca"},
		NotBefore:             now,
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("CA certificate: %w", err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	if err := writeCertKey(dir, "ca", caDER, caKey); err != nil {
		return err
	}
	serial := int64(2)
	issue := func(name string, tmpl *x509.Certificate) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return fmt.Errorf("%s key: %w", name, err)
		}
		tmpl.SerialNumber = big.NewInt(serial)
		serial++
		tmpl.NotBefore = now
		tmpl.NotAfter = now.Add(10 * 365 * 24 * time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return fmt.Errorf("%s certificate: %w", name, err)
		}
		return writeCertKey(dir, name, der, key)
	}
	if err := issue("apiserver", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(NodeIP), net.ParseIP(ServiceIP)},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
	}); err != nil {
		return err
	}
	for _, id := range identities(nodes) {
		if err := issue(id.file, &x509.Certificate{
			Subject:     pkix.Name{CommonName: id.cn, Organization: id.orgs},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}); err != nil {
			return err
		}
		if err := writeKubeconfig(filepath.Join(dir, id.file+".kubeconfig"), fmt.Sprintf("https://%s:%d", NodeIP, APIPort),
			filepath.Join(dir, "ca.crt"), filepath.Join(dir, id.file+".crt"), filepath.Join(dir, id.file+".key")); err != nil {
			return err
		}
	}
	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("service-account key: %w", err)
	}
	if err := writePEM(filepath.Join(dir, "sa.key"), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(sa)); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return fmt.Errorf("service-account public key: %w", err)
	}
	return writePEM(filepath.Join(dir, "sa.pub"), "PUBLIC KEY", pub)
}

func writeCertKey(dir, name string, der []byte, key *ecdsa.PrivateKey) error {
	if err := writePEM(filepath.Join(dir, name+".crt"), "CERTIFICATE", der); err != nil {
		return err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("%s key: %w", name, err)
	}
	return writePEM(filepath.Join(dir, name+".key"), "EC PRIVATE KEY", kb)
}

func writePEM(path, typ string, der []byte) error {
	b := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// writeKubeconfig writes a kubeconfig with file references (not embedded
// data), so a reader sees which certificate each part uses.
func writeKubeconfig(path, server, ca, cert, key string) error {
	s := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: rdmanet-cluster
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: user
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: rdmanet-cluster
  context: {cluster: rdmanet-cluster, user: user}
current-context: rdmanet-cluster
`, server, ca, cert, key)
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
