package verbs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenAdd(t *testing.T) {
	tests := []struct {
		name    string
		netns   string
		dirFile bool // the state dir's path is a file
		wantErr string
	}{
		{name: "held", netns: "/proc/self/ns/net"},
		{name: "pod netns gone", netns: "/var/run/netns/rdmanet-test-gone", wantErr: `open pod netns "/var/run/netns/rdmanet-test-gone"`},
		{name: "state dir unusable", netns: "/proc/self/ns/net", dirFile: true, wantErr: "private directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			if tc.dirFile {
				if err := os.WriteFile(dir, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			lock := filepath.Join(dir, "dev.lock")
			h, err := OpenAdd(tc.netns, dir, lock)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("OpenAdd: %v, want %q in it", err, tc.wantErr)
				}
				if _, err := os.Stat(lock); err == nil {
					t.Fatal("lock file made by a failed OpenAdd")
				}
				return
			}
			if err != nil {
				t.Fatalf("OpenAdd: %v", err)
			}
			if h.PodNS == nil || h.HostNS == nil {
				t.Fatal("a netns is not open")
			}
			if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
				t.Fatalf("state dir: %v %v, want mode 0700", fi, err)
			}
			if _, err := os.Stat(lock); err != nil {
				t.Fatalf("lock file: %v", err)
			}
			h.Close()
			if _, err := os.Stat(lock); !os.IsNotExist(err) {
				t.Fatalf("lock file left behind: %v", err)
			}
		})
	}
}
