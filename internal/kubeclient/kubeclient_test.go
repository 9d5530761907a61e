package kubeclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// stuckServer is an API server that never answers a GET of a pod or a
// LIST (it holds them until the client goes), answers a pod's status
// patch at once, and sends a watch's first event only after hold.
func stuckServer(t *testing.T, hold time.Duration) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Query().Get("watch") == "true":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			select {
			case <-time.After(hold):
			case <-r.Context().Done():
				return
			}
			fmt.Fprintln(w, `{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"default","resourceVersion":"2"}}}`)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case r.Method == http.MethodPatch:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintln(w, `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"default"}}`)
		default:
			<-r.Context().Done() // never answers
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func client(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestBoundRequests: a request the server never answers fails at the
// bound with an error that names it; a watch outlives the bound and gets
// its event.
func TestBoundRequests(t *testing.T) {
	const bound = 200 * time.Millisecond
	srv := stuckServer(t, 3*bound)
	cfg := &rest.Config{Host: srv.URL}
	BoundRequests(cfg, bound)
	c := client(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // the test's guard, far above the bound
	defer cancel()

	for _, tc := range []struct {
		name string
		do   func() error
	}{
		{name: "get", do: func() error {
			_, err := c.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{})
			return err
		}},
		{name: "list", do: func() error {
			_, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "request timeout") {
				t.Fatalf("error %v, want the bound's (wrapping context.DeadlineExceeded, naming the request timeout)", err)
			}
			if ctx.Err() != nil {
				t.Fatal("the test's guard ended the request, not the bound")
			}
		})
	}
	t.Run("answered request", func(t *testing.T) {
		if _, err := c.CoreV1().Pods("default").Patch(ctx, "p", "application/merge-patch+json", []byte(`{}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("watch outlives the bound", func(t *testing.T) {
		w, err := c.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		ev, ok := <-w.ResultChan()
		if !ok || ev.Type != watch.Added {
			t.Fatalf("watch gave %v (open %v), want the ADDED event sent after 3× the bound", ev, ok)
		}
	})
}

// TestConfigTimeoutCutsWatches is why BoundRequests exists: client-go's
// rest.Config.Timeout ends a watch at the timeout, before its event.
func TestConfigTimeoutCutsWatches(t *testing.T) {
	const bound = 200 * time.Millisecond
	srv := stuckServer(t, 3*bound)
	c := client(t, &rest.Config{Host: srv.URL, Timeout: bound})
	w, err := c.CoreV1().Pods("default").Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		return // cut before the watch began: as much a cut
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if ev.Type == watch.Added {
			t.Fatal("a watch under rest.Config.Timeout outlived it: BoundRequests' reason is gone, revisit it")
		}
	}
}

func TestLongRunning(t *testing.T) {
	tests := []struct {
		name   string
		url    string
		header string
		want   bool
	}{
		{name: "get", url: "/api/v1/namespaces/a/pods/p"},
		{name: "list", url: "/api/v1/namespaces/a/pods?limit=500"},
		{name: "list with watch=false", url: "/api/v1/pods?watch=false"},
		{name: "watch", url: "/api/v1/pods?watch=true&timeoutSeconds=300", want: true},
		{name: "watch=1", url: "/apis/resource.k8s.io/v1/resourceslices?watch=1", want: true},
		{name: "legacy watch path", url: "/api/v1/watch/namespaces/a/pods", want: true},
		{name: "followed log", url: "/api/v1/namespaces/a/pods/p/log?follow=true", want: true},
		{name: "log", url: "/api/v1/namespaces/a/pods/p/log"},
		{name: "exec upgrade", url: "/api/v1/namespaces/a/pods/p/exec?command=sh", header: "SPDY/3.1", want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, tc.url, nil)
			if tc.header != "" {
				req.Header.Set("Upgrade", tc.header)
			}
			if got := LongRunning(req); got != tc.want {
				t.Errorf("LongRunning(%s) = %v, want %v", tc.url, got, tc.want)
			}
		})
	}
}
