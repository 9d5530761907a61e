package gc_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"

	"github.com/rdmanet/rdmanet/internal/ipam/gc"
)

// apiReply is one canned API server reply, chosen by path and continue token.
type apiReply struct {
	code int
	body string
}

// fakeAPI serves replies keyed by "path?continue" and records every request.
func fakeAPI(t *testing.T, replies map[string]apiReply) (*rest.Config, *[]*http.Request) {
	t.Helper()
	var seen []*http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r)
		rep, ok := replies[r.URL.Path+"?"+r.URL.Query().Get("continue")]
		if !ok {
			rep = apiReply{http.StatusNotFound, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"no reply for ` + r.URL.String() + `"}`}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.code)
		_, _ = w.Write([]byte(rep.body))
	}))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL}, &seen
}

func podJSON(ns, name, uid, phase, status string) string {
	meta := map[string]any{"namespace": ns, "name": name, "uid": uid}
	if status != "" {
		meta["annotations"] = map[string]string{"k8s.v1.cni.cncf.io/network-status": status}
	}
	b, _ := json.Marshal(map[string]any{"metadata": meta, "spec": map[string]any{"nodeName": "n1", "containers": []any{map[string]any{"name": "c", "image": "x"}}}, "status": map[string]any{"phase": phase}})
	return string(b)
}

func TestKubeClusterPods(t *testing.T) {
	forbidden := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods is forbidden: User \"gc\" cannot list resource \"pods\"","reason":"Forbidden","code":403}`
	tests := []struct {
		name    string
		replies map[string]apiReply
		want    map[string]gc.Pod
		// wantErr checks the error (nil: success wanted).
		wantErr func(error) bool
		// requests is the number of requests the call makes.
		requests int
	}{
		{
			name: "two pages, phases and network-status",
			replies: map[string]apiReply{
				"/api/v1/pods?": {200, `{"kind":"PodList","apiVersion":"v1","metadata":{"continue":"page2"},"items":[` +
					podJSON("ns", "running", "u1", "Running", `[{"name":"ns/net","interface":"net1","ips":["10.0.0.5"]}]`) + `,` +
					podJSON("ns", "done", "u2", "Succeeded", "") + `]}`},
				"/api/v1/pods?page2": {200, `{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[` +
					podJSON("other", "failed", "u3", "Failed", "not json") + `,` +
					podJSON("other", "pending", "u4", "Pending", "") + `]}`},
			},
			want: map[string]gc.Pod{
				"ns/running":    {UID: "u1", IPs: map[netip.Addr]bool{netip.MustParseAddr("10.0.0.5"): true}},
				"ns/done":       {UID: "u2", Terminal: true},
				"other/failed":  {UID: "u3", Terminal: true},
				"other/pending": {UID: "u4"},
			},
			requests: 2,
		},
		{
			name:    "forbidden keeps the server's status",
			replies: map[string]apiReply{"/api/v1/pods?": {http.StatusForbidden, forbidden}},
			wantErr: func(err error) bool {
				return apierrors.IsForbidden(err) && strings.Contains(err.Error(), `cannot list resource "pods"`)
			},
			requests: 1,
		},
		{
			name:    "undecodable list",
			replies: map[string]apiReply{"/api/v1/pods?": {200, `{"items":[`}},
			wantErr: func(err error) bool {
				var se *json.SyntaxError
				return errors.As(err, &se)
			},
			requests: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, seen := fakeAPI(t, tt.replies)
			k, err := gc.NewKubeCluster(cfg)
			if err != nil {
				t.Fatal(err)
			}
			got, err := k.Pods(context.Background())
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("Pods: %v", err)
			case tt.wantErr != nil && (err == nil || !tt.wantErr(err)):
				t.Fatalf("Pods error = %v, not the wanted one", err)
			case tt.wantErr == nil && !reflect.DeepEqual(got, tt.want):
				t.Errorf("Pods = %+v, want %+v", got, tt.want)
			}
			if len(*seen) != tt.requests {
				t.Fatalf("%d requests, want %d", len(*seen), tt.requests)
			}
			for _, r := range *seen {
				if r.Method != http.MethodGet || r.URL.Query().Get("limit") != "500" {
					t.Errorf("request %s %s: want a GET with limit=500", r.Method, r.URL)
				}
				if ua := r.Header.Get("User-Agent"); !strings.HasPrefix(ua, rest.DefaultKubernetesUserAgent()) {
					t.Errorf("User-Agent %q, want the client-go default %q", ua, rest.DefaultKubernetesUserAgent())
				}
			}
		})
	}
}

func TestKubeClusterNodes(t *testing.T) {
	tests := []struct {
		name    string
		replies map[string]apiReply
		want    map[string]bool
		wantErr func(error) bool
	}{
		{
			name: "names",
			replies: map[string]apiReply{"/api/v1/nodes?": {200, `{"kind":"NodeList","apiVersion":"v1","metadata":{},"items":[` +
				`{"metadata":{"name":"a"},"status":{"images":[{"names":["x"],"sizeBytes":1}]}},{"metadata":{"name":"b"}}]}`}},
			want: map[string]bool{"a": true, "b": true},
		},
		{
			name:    "empty",
			replies: map[string]apiReply{"/api/v1/nodes?": {200, `{"kind":"NodeList","apiVersion":"v1","metadata":{},"items":[]}`}},
			want:    map[string]bool{},
		},
		{
			name:    "server error is an API error",
			replies: map[string]apiReply{"/api/v1/nodes?": {http.StatusServiceUnavailable, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"ServiceUnavailable","code":503,"message":"etcd is away"}`}},
			wantErr: func(err error) bool {
				return apierrors.IsServiceUnavailable(err) && strings.Contains(err.Error(), "etcd is away")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, _ := fakeAPI(t, tt.replies)
			k, err := gc.NewKubeCluster(cfg)
			if err != nil {
				t.Fatal(err)
			}
			got, err := k.Nodes(context.Background())
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("Nodes: %v", err)
			case tt.wantErr != nil && (err == nil || !tt.wantErr(err)):
				t.Fatalf("Nodes error = %v, not the wanted one", err)
			case tt.wantErr == nil && !reflect.DeepEqual(got, tt.want):
				t.Errorf("Nodes = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNewKubeCluster(t *testing.T) {
	tests := []struct {
		name    string
		cfg     *rest.Config
		wantErr error // nil: success; else errors.Is target
	}{
		{name: "plain host", cfg: &rest.Config{Host: "https://127.0.0.1:6443"}},
		{name: "keeps a given user agent", cfg: &rest.Config{Host: "https://127.0.0.1:6443", UserAgent: "kubectl-rdma"}},
		{name: "unreadable CA file", cfg: &rest.Config{Host: "https://127.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{CAFile: "/nonexistent/ca.crt"}}, wantErr: fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := *tt.cfg
			_, err := gc.NewKubeCluster(tt.cfg)
			if tt.wantErr == nil && err != nil {
				t.Fatalf("NewKubeCluster: %v", err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("NewKubeCluster error = %v, want one wrapping %v", err, tt.wantErr)
			}
			if tt.cfg.UserAgent != before.UserAgent || tt.cfg.APIPath != before.APIPath || tt.cfg.GroupVersion != before.GroupVersion {
				t.Errorf("NewKubeCluster changed the caller's config: %+v", tt.cfg)
			}
		})
	}
}
