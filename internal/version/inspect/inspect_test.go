package inspect

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/version"
)

func TestFile(t *testing.T) {
	script := filepath.Join(t.TempDir(), "whereabouts")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		path    string
		wantErr bool
		rdmanet bool
		pkg     string
	}{
		{"this test binary is an rdmanet build", self, false, true, version.Module + "/internal/version/inspect.test"},
		{"a script has no build info", script, true, false, ""},
		{"missing file", filepath.Join(t.TempDir(), "nope"), true, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := File(tc.path)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ReadBinary: %v", err)
			}
			if err != nil && !strings.Contains(err.Error(), tc.path) {
				t.Errorf("error %q does not name the file", err)
			}
			if b.Rdmanet() != tc.rdmanet || b.Package != tc.pkg {
				t.Fatalf("ReadBinary = %+v", b)
			}
		})
	}
	if b, _ := File(self); b.Is("rdmanet-ipam") {
		t.Fatal("the test binary claims to be rdmanet-ipam")
	}
}
