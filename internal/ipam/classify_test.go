package ipam

import (
	"context"
	"errors"
	"net"
	"net/url"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestClassify(t *testing.T) {
	gr := schema.GroupResource{Group: "rdmanet.io", Resource: "ipamblocks"}
	tests := []struct {
		name string
		err  error
		want error // nil: permanent
	}{
		{name: "already exists", err: apierrors.NewAlreadyExists(gr, "b"), want: ErrConflict},
		{name: "conflict", err: apierrors.NewConflict(gr, "b", errors.New("rv")), want: ErrConflict},
		{name: "not found", err: apierrors.NewNotFound(gr, "b"), want: ErrNotFound},
		{name: "too many requests", err: apierrors.NewTooManyRequests("slow down", 1), want: ErrTransient},
		{name: "service unavailable", err: apierrors.NewServiceUnavailable("down"), want: ErrTransient},
		{name: "internal error", err: apierrors.NewInternalError(errors.New("x")), want: ErrTransient},
		{name: "connection refused", err: &url.Error{Op: "Get", URL: "https://x", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}, want: ErrTransient},
		{name: "forbidden is permanent", err: apierrors.NewForbidden(gr, "b", errors.New("rbac")), want: nil},
		{name: "invalid is permanent", err: apierrors.NewBadRequest("schema"), want: nil},
		{name: "request timeout with the caller alive is retried", err: context.DeadlineExceeded, want: ErrTransient},
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := classify(ctx, "op", apierrors.NewServiceUnavailable("down")); errors.Is(got, ErrTransient) || !errors.Is(got, context.Canceled) {
		t.Errorf("with the caller's ctx canceled: %v, want a final context.Canceled", got)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := classify(context.Background(), "op", tc.err)
			if !errors.Is(got, tc.err) {
				t.Errorf("%v does not wrap the original error", got)
			}
			for _, kind := range []error{ErrConflict, ErrNotFound, ErrTransient} {
				if errors.Is(got, kind) != (kind == tc.want) {
					t.Errorf("errors.Is(%v, %v) = %v", got, kind, errors.Is(got, kind))
				}
			}
		})
	}
}
