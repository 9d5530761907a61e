package main

import (
	"context"
	"encoding/base64"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestHostTokenFlags: --host-token-source and --host-token-file go
// together; with both, the token is on the host before start returns (the
// agent's own --kubeconfig reads that file next).
func TestHostTokenFlags(t *testing.T) {
	dir := t.TempDir()
	src, dest := filepath.Join(dir, "projected-token"), filepath.Join(dir, "rdmanet.d", "token")
	enc := base64.RawURLEncoding.EncodeToString
	token := enc([]byte(`{"alg":"ES256"}`)) + "." + enc([]byte(`{"exp":`+strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)+`}`)) + ".c2ln"
	if err := os.WriteFile(src, []byte(token), 0o400); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		f        hostTokenFlags
		wantErr  string
		wantFile bool
	}{
		{name: "neither: nothing to do", f: hostTokenFlags{}},
		{name: "source alone", f: hostTokenFlags{source: src}, wantErr: "go together"},
		{name: "file alone", f: hostTokenFlags{dest: dest}, wantErr: "go together"},
		{name: "both: copied before start returns", f: hostTokenFlags{source: src, dest: dest}, wantFile: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			err := tt.f.start(ctx, slog.New(slog.DiscardHandler))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("start: %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(dest)
			if tt.wantFile && (err != nil || string(b) != token) {
				t.Fatalf("host token %q, %v; want the projected token", b, err)
			}
			if st, err := os.Stat(dest); tt.wantFile && (err != nil || st.Mode().Perm() != 0o600) {
				t.Fatalf("host token mode %v, %v; want 0600", st, err)
			}
		})
	}
}
