package burstbench

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClearStaleSocket: the bench takes kubelet's PodResources path only
// when no one answers there. A socket a killed run left is removed; a
// listening one (a kubelet's) is an error and stays.
func TestClearStaleSocket(t *testing.T) {
	for _, tc := range []struct {
		name      string
		setup     func(t *testing.T, path string) // makes what is at path
		wantStale bool
		wantErr   string
		wantFile  bool // path still there afterwards
	}{
		{name: "nothing there", setup: func(*testing.T, string) {}},
		{name: "a killed run's socket: removed", setup: staleSocket, wantStale: true},
		{name: "a listening socket: kept, error", setup: liveSocket, wantErr: "answers", wantFile: true},
		{name: "a regular file: kept, error", setup: func(t *testing.T, path string) {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, wantErr: "is not a socket", wantFile: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "kubelet.sock")
			tc.setup(t, path)
			stale, err := clearStaleSocket(path)
			if stale != tc.wantStale {
				t.Errorf("stale = %v, want %v", stale, tc.wantStale)
			}
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
			if _, err := os.Lstat(path); (err == nil) != tc.wantFile {
				t.Errorf("%s there afterwards: %v, want %v", path, err == nil, tc.wantFile)
			}
		})
	}
}

// staleSocket leaves a unix socket file nobody listens on, as a process
// killed while serving does.
func staleSocket(t *testing.T, path string) {
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
}

func liveSocket(t *testing.T, path string) {
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
}
