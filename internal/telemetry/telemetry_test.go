package telemetry

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestChecks(t *testing.T) {
	ok := Check{Name: "a", Fn: func() error { return nil }}
	bad := Check{Name: "b", Fn: func() error { return errors.New("socket /run/x.sock: not serving yet") }}
	tests := []struct {
		name     string
		checks   Checks
		method   string
		query    string
		wantCode int
		wantBody string
	}{
		{name: "no checks", method: "GET", wantCode: 200, wantBody: "ok\n"},
		{name: "all pass", checks: Checks{ok, ok}, method: "GET", wantCode: 200, wantBody: "ok\n"},
		{name: "one fails, named", checks: Checks{ok, bad}, method: "GET", wantCode: 503, wantBody: "b: socket /run/x.sock: not serving yet\n"},
		{name: "verbose lists each", checks: Checks{ok, bad}, method: "GET", query: "?verbose", wantCode: 503, wantBody: "[+]a ok\n[-]b: socket /run/x.sock: not serving yet\n"},
		{name: "verbose all pass", checks: Checks{ok}, method: "GET", query: "?verbose", wantCode: 200, wantBody: "[+]a ok\nok\n"},
		{name: "HEAD", checks: Checks{ok}, method: "HEAD", wantCode: 200},
		{name: "POST refused", checks: Checks{ok}, method: "POST", wantCode: 405, wantBody: "method not allowed\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			tt.checks.ServeHTTP(rec, httptest.NewRequest(tt.method, "/readyz"+tt.query, nil))
			if rec.Code != tt.wantCode || (tt.method != "HEAD" && rec.Body.String() != tt.wantBody) {
				t.Fatalf("%s: %d %q, want %d %q", tt.method, rec.Code, rec.Body.String(), tt.wantCode, tt.wantBody)
			}
		})
	}
}

func TestHeartbeat(t *testing.T) {
	now := time.Unix(1000, 0)
	h := &Heartbeat{Now: func() time.Time { return now }}
	tests := []struct {
		name    string
		step    func()
		wantErr string
	}{
		{name: "never beat", step: func() {}, wantErr: "has not run yet"},
		{name: "fresh", step: func() { h.Beat(); now = now.Add(30 * time.Second) }},
		{name: "at the limit", step: func() { now = now.Add(30 * time.Second) }},
		{name: "stale", step: func() { now = now.Add(time.Second) }, wantErr: "last ran 1m1s ago (limit 1m0s): it is stuck"},
		{name: "beats again", step: func() { h.Beat() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.step()
			err := h.Fresh(time.Minute)
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Fresh = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestNewLogger(t *testing.T) {
	tests := []struct {
		name, format, level string
		wantErr             string
		wantJSON            bool
		wantDebug           bool
	}{
		{name: "text info", format: "text", level: "info"},
		{name: "json debug", format: "json", level: "debug", wantJSON: true, wantDebug: true},
		{name: "bad format", format: "xml", level: "info", wantErr: `--log-format="xml": must be text or json`},
		{name: "bad level", format: "json", level: "loud", wantErr: `--log-level="loud": must be debug, info, warn or error`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			log, err := NewLogger(&buf, tt.format, tt.level)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			log.Debug("d")
			log.With(CNICallAttrs("c1", "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p")...).Info("ADD done", "container", "c1", "networks", 2)
			out := buf.String()
			if strings.Contains(out, `"msg":"d"`) || strings.Contains(out, "msg=d") {
				if !tt.wantDebug {
					t.Fatalf("debug record at info level:\n%s", out)
				}
			}
			last := strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])
			if tt.wantJSON {
				var rec map[string]any
				if err := json.Unmarshal([]byte(last), &rec); err != nil {
					t.Fatalf("not JSON: %q: %v", last, err)
				}
				if rec["container"] != "c1" || rec["pod_namespace"] != "ns" || rec["pod_name"] != "p" || rec["networks"] != 2.0 {
					t.Fatalf("record %v lacks the call's fields", rec)
				}
				if n := strings.Count(last, `"container"`); n != 1 {
					t.Fatalf("record %s names the container %d times", last, n)
				}
			} else if !strings.Contains(last, "container=c1 pod_namespace=ns pod_name=p networks=2") || strings.Count(last, "container=") != 1 {
				t.Fatalf("record %q lacks the call's fields or repeats one", last)
			}
		})
	}
}

func TestCNICallAttrs(t *testing.T) {
	tests := []struct {
		name, container, args string
		want                  []any
	}{
		{name: "kubelet's args", container: "c", args: "IgnoreUnknown=1;K8S_POD_NAMESPACE=ai;K8S_POD_NAME=trainer-0;K8S_POD_INFRA_CONTAINER_ID=c;K8S_POD_UID=u",
			want: []any{"container", "c", "pod_namespace", "ai", "pod_name", "trainer-0"}},
		{name: "no args", container: "c", want: []any{"container", "c"}},
		{name: "namespace only", container: "c", args: "K8S_POD_NAMESPACE=ai", want: []any{"container", "c", "pod_namespace", "ai"}},
		{name: "junk", container: "c", args: ";;=x;K8S_POD_NAME", want: []any{"container", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CNICallAttrs(tt.container, tt.args); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("CNICallAttrs = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestServe(t *testing.T) {
	live := Checks{{Name: "loop", Fn: func() error { return nil }}}
	ready := Checks{{Name: "pools", Fn: func() error { return errors.New("pool x is not registered") }}}
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "m 1\n") })
	srv, err := Serve(slog.New(slog.DiscardHandler), "127.0.0.1:0", Mux(metrics, live, ready))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	tests := []struct {
		name, path string
		wantCode   int
		wantBody   string
	}{
		{name: "metrics", path: "/metrics", wantCode: 200, wantBody: "m 1\n"},
		{name: "healthz", path: "/healthz", wantCode: 200, wantBody: "ok\n"},
		{name: "readyz", path: "/readyz", wantCode: 503, wantBody: "pools: pool x is not registered\n"},
		{name: "unknown", path: "/debug/pprof/", wantCode: 404, wantBody: "404 page not found\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Get("http://" + srv.Addr() + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantCode || string(b) != tt.wantBody {
				t.Fatalf("GET %s: %d %q, want %d %q", tt.path, resp.StatusCode, b, tt.wantCode, tt.wantBody)
			}
		})
	}
	if _, err := Serve(slog.New(slog.DiscardHandler), srv.Addr(), Mux(nil, nil, nil)); err == nil || !strings.Contains(err.Error(), "fix:") {
		t.Fatalf("second listener on %s: %v, want an error with a fix", srv.Addr(), err)
	}
}
