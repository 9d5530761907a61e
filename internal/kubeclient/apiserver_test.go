package kubeclient

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/rdmanet/rdmanet/test/apiserver"
)

// countWatches counts the watch requests of clients built from cfg.
func countWatches(cfg *rest.Config, n *atomic.Int32) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &watchCounter{rt: rt, n: n}
	})
}

type watchCounter struct {
	rt http.RoundTripper
	n  *atomic.Int32
}

func (w *watchCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Query().Get("watch") == "true" {
		w.n.Add(1)
	}
	return w.rt.RoundTrip(req)
}

func (w *watchCounter) WrappedRoundTripper() http.RoundTripper { return w.rt }

// TestInformerOnRealAPIServer: an informer over a client with
// BoundRequests keeps its one watch open past the bound, and sees an
// object created after it; under rest.Config.Timeout the same informer
// re-opens its watch at every timeout.
func TestInformerOnRealAPIServer(t *testing.T) {
	s := apiserver.StartT(t)
	const bound = 2 * time.Second
	tests := []struct {
		name        string
		setup       func(*rest.Config)
		wantWatches func(n int32) bool
		want        string
	}{
		{name: "BoundRequests", setup: func(c *rest.Config) { BoundRequests(c, bound) }, wantWatches: func(n int32) bool { return n == 1 }, want: "1"},
		{name: "rest.Config.Timeout", setup: func(c *rest.Config) { c.Timeout = bound }, wantWatches: func(n int32) bool { return n > 1 }, want: "more than 1"},
	}
	admin, err := kubernetes.NewForConfig(s.Config())
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ns := "kubeclient-" + []string{"bound", "timeout"}[i]
			if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			cfg := s.Config()
			var watches atomic.Int32
			countWatches(cfg, &watches)
			tc.setup(cfg)
			c, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			f := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace(ns))
			inf := f.Core().V1().ConfigMaps().Informer()
			f.Start(ctx.Done())
			if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
				t.Fatal("informer did not sync")
			}
			time.Sleep(3 * bound) // the watch is older than the bound
			if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
				if _, ok, _ := inf.GetStore().GetByKey(ns + "/late"); ok {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the informer never saw the ConfigMap created after the bound")
				}
			}
			if n := watches.Load(); !tc.wantWatches(n) {
				t.Errorf("%d watch requests, want %s", n, tc.want)
			}
		})
	}
}
