package meta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/rdmanet/rdmanet/internal/devinfo"
)

func TestErrorReason(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{name: "nil", err: nil, want: ""},
		{name: "plain", err: errors.New("boom"), want: ReasonOther},
		{name: "step", err: atStep(ReasonDevice, errors.New("no device")), want: ReasonDevice},
		{name: "step wrapped again", err: fmt.Errorf("ADD: %w", atStep(ReasonPod, errors.New("gone"))), want: ReasonPod},
		{name: "delegate with a CNI error inside", err: atStep(ReasonDelegate, &types.Error{Code: types.ErrInvalidNetworkConfig, Msg: "bad"}), want: ReasonDelegate},
		{name: "lock held", err: types.NewError(types.ErrTryAgainLater, "another CNI call holds container c1", ""), want: ReasonBusy},
		{name: "bad config", err: types.NewError(types.ErrInvalidNetworkConfig, "x", ""), want: ReasonConfig},
		{name: "bad request", err: types.NewError(types.ErrDecodingFailure, "x", ""), want: ReasonConfig},
		{name: "deadline", err: fmt.Errorf("pod: %w", context.DeadlineExceeded), want: ReasonTimeout},
		{name: "deadline beats the step", err: atStep(ReasonPod, fmt.Errorf("get pod: %w", context.DeadlineExceeded)), want: ReasonTimeout},
		{name: "panic", err: &PanicError{Where: "x", Value: "y"}, want: ReasonPanic},
		{name: "step keeps the text", err: atStep(ReasonCache, errors.New("cache dir: read-only file system")), want: ReasonCache},
	}
	known := map[string]bool{"": true}
	for _, r := range Reasons {
		known[r] = true
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ErrorReason(tt.err)
			if got != tt.want {
				t.Fatalf("ErrorReason(%v) = %q, want %q", tt.err, got, tt.want)
			}
			if !known[got] {
				t.Fatalf("%q is not in Reasons", got)
			}
		})
	}
	if e := atStep(ReasonCache, errors.New("cache dir: read-only file system")); e.Error() != "cache dir: read-only file system" {
		t.Fatalf("atStep changed the message: %q", e.Error())
	}
	if atStep(ReasonCache, nil) != nil {
		t.Fatal("atStep(nil) is not nil")
	}
}

// recorder is a CallObserver (and Observer) that keeps what it saw.
type recorder struct {
	mu     sync.Mutex
	status []string
}

func (r *recorder) DelAttempt(DelAttempt)                               {}
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
