package certs

import (
	"crypto/tls"
	"os"
	"path/filepath"
)

func tlsPair(dir string) (tls.Certificate, error) {
	return tls.LoadX509KeyPair(filepath.Join(dir, KeyCert), filepath.Join(dir, KeyKey))
}

func readFile(p string) ([]byte, error) { return os.ReadFile(p) }
