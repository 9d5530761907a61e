package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/rdmanet/rdmanet/internal/cni/meta"
	"github.com/rdmanet/rdmanet/internal/devinfo"
)

// scriptedStatus is a Source whose SetNetworkStatus answers from a script
// of errors (nil = success), optionally holding each call until released.
type scriptedStatus struct {
	mu      sync.Mutex
	errs    []error
	calls   int
	written map[string]string // pod -> interface of the first status entry
	gate    chan struct{}     // when non-nil, each call waits for a value or ctx end
}

func (s *scriptedStatus) Pod(context.Context, string, string) (*corev1.Pod, error) {
	return nil, meta.ErrNotFound
}
func (s *scriptedStatus) NAD(context.Context, string, string) (*nadv1.NetworkAttachmentDefinition, error) {
	return nil, meta.ErrNotFound
}

func (s *scriptedStatus) SetNetworkStatus(ctx context.Context, ns, name string, _ k8stypes.UID, st []devinfo.NetworkStatus) error {
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if len(s.errs) > 0 {
		err := s.errs[0]
		s.errs = s.errs[1:]
		if err != nil {
			return err
		}
	}
	if s.written == nil {
		s.written = map[string]string{}
	}
	s.written[ns+"/"+name] = st[0].Interface
	return nil
}

func (s *scriptedStatus) result() (int, map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for k, v := range s.written {
		out[k] = v
	}
	return s.calls, out
}

func waitIdle(t *testing.T, w *StatusWriter) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w.Close(ctx)
	if n := w.Pending(); n != 0 {
		t.Fatalf("%d writes still pending", n)
	}
}

func TestStatusWriter(t *testing.T) {
	podGone := apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "trainer-0")
	recreated := apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "trainer-0", errors.New("Precondition failed: UID in precondition: 1, UID in object meta: 2"))
	unavailable := apierrors.NewServiceUnavailable("etcd leader changed")
	tests := []struct {
		name      string
		errs      []error
		wantCalls int
		wantPods  map[string]string
	}{
		{name: "written at once", errs: nil, wantCalls: 1, wantPods: map[string]string{"ai/trainer-0": "eth0"}},
		{name: "transient errors are retried", errs: []error{unavailable, errors.New("connection refused"), nil}, wantCalls: 3, wantPods: map[string]string{"ai/trainer-0": "eth0"}},
		{name: "pod gone: not retried", errs: []error{podGone}, wantCalls: 1, wantPods: map[string]string{}},
		{name: "pod recreated (UID precondition): not retried", errs: []error{recreated}, wantCalls: 1, wantPods: map[string]string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := &scriptedStatus{errs: tc.errs}
			w := &StatusWriter{Source: src, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Backoff: time.Millisecond}
			w.Submit("c1", "ai", "trainer-0", "uid-1", devinfo.Statuses([]nadv1.NetworkStatus{{Interface: "eth0"}}))
			waitIdle(t, w)
			calls, written := src.result()
			if calls != tc.wantCalls {
				t.Errorf("calls = %d, want %d", calls, tc.wantCalls)
			}
			if len(written) != len(tc.wantPods) || written["ai/trainer-0"] != tc.wantPods["ai/trainer-0"] {
				t.Errorf("written = %v, want %v", written, tc.wantPods)
			}
		})
	}
}

func TestStatusWriterGivesUpAfterMaxAge(t *testing.T) {
	src := &scriptedStatus{errs: []error{errors.New("down"), errors.New("down"), errors.New("down"), errors.New("down"), errors.New("down"), errors.New("down"), errors.New("down"), errors.New("down")}}
	w := &StatusWriter{Source: src, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Backoff: 5 * time.Millisecond, MaxAge: 30 * time.Millisecond}
	w.Submit("c1", "ai", "trainer-0", "uid-1", devinfo.Statuses([]nadv1.NetworkStatus{{Interface: "eth0"}}))
	waitIdle(t, w)
	calls, written := src.result()
	// it gave up (Close returned) before the script's eight failures ran out
	if len(written) != 0 || calls < 1 || calls >= 8 {
		t.Fatalf("calls = %d written = %v: want it to give up after MaxAge without writing", calls, written)
	}
}

func TestStatusWriterCancelAndSupersede(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	t.Run("DEL cancels the pending write", func(t *testing.T) {
		src := &scriptedStatus{gate: make(chan struct{})}
		w := &StatusWriter{Source: src, Log: log}
		w.Submit("c1", "ai", "trainer-0", "uid-1", devinfo.Statuses([]nadv1.NetworkStatus{{Interface: "eth0"}}))
		w.Cancel("c1")
		waitIdle(t, w)
		if calls, written := src.result(); calls != 0 || len(written) != 0 {
			t.Fatalf("calls = %d written = %v after cancel", calls, written)
		}
	})
	t.Run("a newer ADD of the same pod wins", func(t *testing.T) {
		src := &scriptedStatus{gate: make(chan struct{})}
		w := &StatusWriter{Source: src, Log: log}
		w.Submit("old-sandbox", "ai", "trainer-0", "uid-1", devinfo.Statuses([]nadv1.NetworkStatus{{Interface: "old"}}))
		w.Submit("new-sandbox", "ai", "trainer-0", "uid-1", devinfo.Statuses([]nadv1.NetworkStatus{{Interface: "new"}}))
		w.Submit("other", "ai", "trainer-1", "uid-2", devinfo.Statuses([]nadv1.NetworkStatus{{Interface: "eth0"}}))
		close(src.gate)
		waitIdle(t, w)
		_, written := src.result()
		if written["ai/trainer-0"] != "new" || written["ai/trainer-1"] != "eth0" {
			t.Fatalf("written = %v, want the newer sandbox's status and the other pod's", written)
		}
	})
	t.Run("Close gives up on writes that cannot finish", func(t *testing.T) {
		src := &scriptedStatus{gate: make(chan struct{})}
		w := &StatusWriter{Source: src, Log: log}
		w.Submit("c1", "ai", "trainer-0", "uid-1", devinfo.Statuses([]nadv1.NetworkStatus{{Interface: "eth0"}}))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		w.Close(ctx)
		if n := w.Pending(); n != 0 {
			t.Fatalf("%d writes pending after Close", n)
		}
	})
}

// recorder is a CallObserver (and Observer) that keeps what it saw.
type recorder struct {
	mu     sync.Mutex
	status []string
}

func (r *recorder) DelAttempt(meta.DelAttempt)                          {}
func (r *recorder) Released(string)                                     {}
func (r *recorder) PendingRecords(int)                                  {}
func (r *recorder) Panic(string)                                        {}
func (r *recorder) Call(string, time.Duration, error)                   {}
func (r *recorder) Step(string, time.Duration)                          {}
func (r *recorder) Delegate(string, string, bool, time.Duration, error) {}
func (r *recorder) StatusWrite(result string, attempts int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status = append(r.status, fmt.Sprintf("%s/%d", result, attempts))
}

func TestStatusWriterObserved(t *testing.T) {
	podGone := apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "trainer-0")
	unavailable := apierrors.NewServiceUnavailable("etcd leader changed")
	down := errors.New("connection refused")
	tests := []struct {
		name   string
		errs   []error
		maxAge time.Duration
		want   string
	}{
		{name: "written at once", want: "written/1"},
		{name: "written after two retries", errs: []error{unavailable, down, nil}, want: "written/3"},
		{name: "pod gone", errs: []error{podGone}, want: "pod_gone/1"},
		{name: "gave up", errs: []error{down, down, down, down, down, down, down, down, down, down}, maxAge: 30 * time.Millisecond, want: "gave_up/"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			w := &StatusWriter{Source: &scriptedStatus{errs: tc.errs}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Backoff: time.Millisecond, MaxAge: tc.maxAge, Observer: rec}
			w.Submit("c1", "ai", "trainer-0", "uid-1", devinfo.Statuses([]nadv1.NetworkStatus{{Interface: "eth0"}}))
			waitIdle(t, w)
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.status) != 1 || len(rec.status[0]) < len(tc.want) || rec.status[0][:len(tc.want)] != tc.want {
				t.Fatalf("observed %v, want one %q", rec.status, tc.want)
			}
		})
	}
	t.Run("cancelled by DEL", func(t *testing.T) {
		rec := &recorder{}
		src := &scriptedStatus{gate: make(chan struct{})}
		w := &StatusWriter{Source: src, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Backoff: time.Millisecond, Observer: rec}
		w.Submit("c1", "ai", "trainer-0", "uid-1", devinfo.Statuses([]nadv1.NetworkStatus{{Interface: "eth0"}}))
		w.Cancel("c1")
		waitIdle(t, w)
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if len(rec.status) != 1 || rec.status[0] != "cancelled/1" {
			t.Fatalf("observed %v, want [cancelled/1]", rec.status)
		}
	})
}
