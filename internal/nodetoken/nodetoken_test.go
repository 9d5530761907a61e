package nodetoken

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// jwt builds an unsigned token with the given payload (the package never
// checks signatures).
func jwt(payload string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(payload)) + ".c2ln"
}

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		token   string
		want    Claims
		wantErr string
	}{
		{name: "pod-bound token on a node", token: jwt(`{"exp":1777640400,"iat":1777636800,"kubernetes.io":{"node":{"name":"gpu-1","uid":"u"},"pod":{"name":"rdmanet-node-x","uid":"p"}}}`),
			want: Claims{Expiry: time.Unix(1777640400, 0).UTC(), IssuedAt: time.Unix(1777636800, 0).UTC(), Node: "gpu-1", Pod: "rdmanet-node-x"}},
		{name: "legacy Secret token: no expiry", token: jwt(`{"iss":"kubernetes/serviceaccount","sub":"system:serviceaccount:rdmanet-system:rdmanet-daemon"}`)},
		{name: "trailing newline", token: jwt(`{"exp":1}`) + "\n", want: Claims{Expiry: time.Unix(1, 0).UTC()}},
		{name: "not a JWT", token: "opaque-token", wantErr: "not a JWT"},
		{name: "payload not base64", token: "a.!!!.c", wantErr: "base64url"},
		{name: "payload not JSON", token: "a." + base64.RawURLEncoding.EncodeToString([]byte("[1]")) + ".c", wantErr: "JSON object"},
		{name: "exp not a number", token: jwt(`{"exp":"soon"}`), wantErr: "JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.token))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse = %+v, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Parse = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	exp := t0.Add(time.Hour)
	tests := []struct {
		name    string
		content *string
		now     time.Time
		wantErr []string // substrings; nil: no error
		expired bool
	}{
		{name: "valid", content: ptr(jwt(`{"exp":` + itoa(exp) + `}`)), now: t0},
		{name: "one second before expiry", content: ptr(jwt(`{"exp":` + itoa(exp) + `}`)), now: exp.Add(-time.Second)},
		{name: "at expiry: fails closed", content: ptr(jwt(`{"exp":` + itoa(exp) + `}`)), now: exp,
			wantErr: []string{"token", "expired at 2026-05-01T13:00:00Z", "(0s ago)", "rdmanet-node"}, expired: true},
		{name: "long expired: names file and age", content: ptr(jwt(`{"exp":` + itoa(exp) + `}`)), now: exp.Add(90 * time.Minute),
			wantErr: []string{"expired at 2026-05-01T13:00:00Z", "(1h30m0s ago)"}, expired: true},
		{name: "no expiry (legacy): the API server judges", content: ptr(jwt(`{"sub":"x"}`)), now: t0},
		{name: "not a JWT: the API server judges", content: ptr("opaque"), now: t0},
		{name: "missing file", content: nil, now: t0, wantErr: []string{"no such file", "rdmanet-node pod"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := filepath.Join(dir, "token-"+itoa(time.Unix(int64(i), 0)))
			if tt.content != nil {
				if err := os.WriteFile(f, []byte(*tt.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			err := Check(f, tt.now)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Check passed, want an error")
			}
			for _, s := range append(tt.wantErr, f) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			if errors.Is(err, ErrExpired) != tt.expired {
				t.Errorf("errors.Is(ErrExpired) = %v, want %v", !tt.expired, tt.expired)
			}
		})
	}
	if err := Check("", t0); err != nil {
		t.Errorf("Check of no token file: %v", err)
	}
}

func TestRefresherSync(t *testing.T) {
	dir := t.TempDir()
	src, dest := filepath.Join(dir, "projected", "token"), filepath.Join(dir, "host", "rdmanet.d", "token")
	if err := os.MkdirAll(filepath.Dir(src), 0o755); err != nil {
		t.Fatal(err)
	}
	now := t0
	r := &Refresher{Source: src, Dest: dest, Now: func() time.Time { return now }}
	tok1 := jwt(`{"exp":` + itoa(t0.Add(time.Hour)) + `,"kubernetes.io":{"node":{"name":"gpu-1"}}}`)
	tok2 := jwt(`{"exp":` + itoa(t0.Add(2*time.Hour)) + `}`)
	steps := []struct {
		name      string
		src       *string // written to the source before the round; nil: leave
		now       time.Time
		wantWrote bool
		wantErr   string
		wantDest  string
	}{
		{name: "no projected token yet", now: t0, wantErr: "no such file"},
		{name: "first token copied", src: ptr(tok1 + "\n"), now: t0, wantWrote: true, wantDest: tok1},
		{name: "unchanged: not rewritten", now: t0.Add(time.Minute), wantDest: tok1},
		{name: "kubelet rotated: copied", src: ptr(tok2), now: t0.Add(48 * time.Minute), wantWrote: true, wantDest: tok2},
		{name: "source expired (kubelet gone): host file kept", src: ptr(tok1), now: t0.Add(3 * time.Hour), wantErr: "expired", wantDest: tok2},
		{name: "empty source", src: ptr(""), now: t0, wantErr: "empty", wantDest: tok2},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if s.src != nil {
				if err := os.WriteFile(src, []byte(*s.src), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			now = s.now
			wrote, err := r.Sync()
			if s.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), s.wantErr) {
					t.Fatalf("Sync = %v, %v; want error containing %q", wrote, err, s.wantErr)
				}
			} else if err != nil {
				t.Fatalf("Sync: %v", err)
			}
			if wrote != s.wantWrote {
				t.Errorf("wrote = %v, want %v", wrote, s.wantWrote)
			}
			if s.wantDest == "" {
				return
			}
			b, err := os.ReadFile(dest)
			if err != nil || string(b) != s.wantDest {
				t.Fatalf("host file = %q, %v; want %q", b, err, s.wantDest)
			}
			if st, _ := os.Stat(dest); st.Mode().Perm() != Mode {
				t.Errorf("host file mode %o, want %o", st.Mode().Perm(), Mode)
			}
		})
	}
	// A wrong mode on an identical file is repaired.
	if err := os.WriteFile(src, []byte(tok2), 0o600); err != nil {
		t.Fatal(err)
	}
	now = t0
	if err := os.Chmod(dest, 0o644); err != nil {
		t.Fatal(err)
	}
	if wrote, err := r.Sync(); err != nil || !wrote {
		t.Fatalf("Sync of a 0644 host file = %v, %v; want rewritten 0600", wrote, err)
	}
}

// TestRefresherReadersSeeWholeTokens: while the host file is replaced over
// and over, every read returns one of the tokens whole, never a torn or
// empty file (the fallback binaries read it per call).
func TestRefresherReadersSeeWholeTokens(t *testing.T) {
	dir := t.TempDir()
	src, dest := filepath.Join(dir, "src"), filepath.Join(dir, "dest")
	tokens := []string{jwt(`{"exp":` + itoa(t0.Add(time.Hour)) + `,"n":"` + strings.Repeat("a", 4000) + `"}`),
		jwt(`{"exp":` + itoa(t0.Add(2*time.Hour)) + `,"n":"` + strings.Repeat("b", 3000) + `"}`)}
	r := &Refresher{Source: src, Dest: dest, Now: func() time.Time { return t0 }}
	if err := os.WriteFile(src, []byte(tokens[0]), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var bad []string
	var mu sync.Mutex
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				b, err := os.ReadFile(dest)
				if err != nil || (string(b) != tokens[0] && string(b) != tokens[1]) {
					mu.Lock()
					bad = append(bad, string(b[:min(len(b), 40)]))
					mu.Unlock()
				}
			}
		}()
	}
	for i := range 200 {
		if err := os.WriteFile(src, []byte(tokens[(i+1)%2]), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d reads saw a torn or missing token, e.g. %q", len(bad), bad[0])
	}
}

func ptr(s string) *string { return &s }

func itoa(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }
