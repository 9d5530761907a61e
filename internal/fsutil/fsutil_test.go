package fsutil

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileAtomic(t *testing.T) {
	tests := []struct {
		name string
		sync bool
		perm os.FileMode
	}{
		{"synced private", true, 0o600},
		{"unsynced read-only", false, 0o444},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "sub", "f.json")
			for _, content := range []string{"old", "new"} {
				if err := WriteFileAtomic(p, []byte(content), tc.perm, tc.sync); err != nil {
					t.Fatal(err)
				}
			}
			b, err := os.ReadFile(p)
			if err != nil || string(b) != "new" {
				t.Fatalf("content %q, %v", b, err)
			}
			fi, _ := os.Stat(p)
			if fi.Mode().Perm() != tc.perm {
				t.Fatalf("perm %v, want %v", fi.Mode().Perm(), tc.perm)
			}
			ents, _ := os.ReadDir(filepath.Dir(p))
			if len(ents) != 1 {
				t.Fatalf("temporary files left: %v", ents)
			}
		})
	}
	if err := WriteFileAtomic(filepath.Join("/proc/version", "x"), []byte("x"), 0o600, true); err == nil {
		t.Fatal("want an error writing under a file")
	}
}
