package daemonclient

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestProbe(t *testing.T) {
	dir := t.TempDir()
	serve := func(t *testing.T, name string, answer bool) string {
		p := filepath.Join(dir, name)
		l, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				if answer {
					_, _ = c.Read(make([]byte, 1))
					_, _ = c.Write([]byte(`{"error":{}}`))
				}
				c.Close()
			}
		}()
		return p
	}
	stale := filepath.Join(dir, "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, err string
	}{
		{"daemon answers", serve(t, "ok.sock", true), ""},
		{"daemon closes without an answer", serve(t, "mute.sock", false), "without an answer"},
		{"socket of a dead daemon", stale, "connection refused"},
		{"not a socket", plain, "not a socket"},
		{"missing", filepath.Join(dir, "none.sock"), "no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Probe(tc.path, 2*time.Second)
			if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Probe = %v, want %q", err, tc.err)
			}
		})
	}
}
