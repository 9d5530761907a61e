package apiserver

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
)

// ResignServiceAccountToken returns token (one the server issued) with its
// claims changed by mutate and signed again with the server's
// ServiceAccount signing key: the token the server would have issued with
// those claims. Tests use it for what the API refuses to mint, e.g. a
// token already past its expiry (TokenRequest's minimum lifetime is ten
// minutes).
func (s *Server) ResignServiceAccountToken(token string, mutate func(claims map[string]any)) (string, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", errors.New("apiserver: not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", fmt.Errorf("apiserver: JWT payload: %w", err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		return "", fmt.Errorf("apiserver: JWT payload: %w", err)
	}
	mutate(claims)
	if payload, err = json.Marshal(claims); err != nil {
		return "", err
	}
	b, err := os.ReadFile(s.certs.saKey)
	if err != nil {
		return "", err
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return "", fmt.Errorf("apiserver: %s: no PEM block", s.certs.saKey)
	}
	key, err := x509.ParseECPrivateKey(blk.Bytes)
	if err != nil {
		return "", fmt.Errorf("apiserver: %s: %w", s.certs.saKey, err)
	}
	// The header (alg ES256, kid) stays: same key.
	signed := parts[0] + "." + base64.RawURLEncoding.EncodeToString(payload)
	sum := sha256.Sum256([]byte(signed))
	r, sv, err := ecdsa.Sign(rand.Reader, key, sum[:])
	if err != nil {
		return "", err
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	sv.FillBytes(sig[32:])
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}
