package bench

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestCreateRetrying: a pod creation refused by a webhook timing out (the
// validating webhook fails closed) is retried as a workload controller
// would; a refusal for cause is not.
func TestCreateRetrying(t *testing.T) {
	webhookTimeout := apierrors.NewInternalError(errors.New(`failed calling webhook "validate-pod.rdmanet.io": failed to call webhook: Post "https://rdmanet-controller.rdmanet-system.svc:443/validate-pod?timeout=5s": context deadline exceeded`))
	forbidden := apierrors.NewForbidden(corev1.Resource("pods"), "p", errors.New("denied by policy"))
	tests := []struct {
		name        string
		failures    []error // the first creations' errors, then success
		wantErr     bool
		wantRetried int64
	}{
		{name: "created at once", wantRetried: 0},
		{name: "webhook timeouts twice, then created", failures: []error{webhookTimeout, webhookTimeout}, wantRetried: 2},
		{name: "server timeout, then it exists (the first attempt went through)", failures: []error{apierrors.NewServerTimeout(corev1.Resource("pods"), "create", 1), apierrors.NewAlreadyExists(corev1.Resource("pods"), "p")}, wantRetried: 1},
		{name: "forbidden: not retried", failures: []error{forbidden}, wantErr: true},
		{name: "already exists at the first attempt: an error (the batch's pods must be new)", failures: []error{apierrors.NewAlreadyExists(corev1.Resource("pods"), "p")}, wantErr: true},
		{name: "webhook timeouts past 5 attempts", failures: []error{webhookTimeout, webhookTimeout, webhookTimeout, webhookTimeout, webhookTimeout}, wantErr: true, wantRetried: 4},
	}
	defer func(p time.Duration) { createRetryPause = p }(createRetryPause)
	createRetryPause = time.Millisecond
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			calls := 0
			client.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
				calls++
				if calls <= len(tc.failures) {
					return true, nil, tc.failures[calls-1]
				}
				return false, nil, nil
			})
			var retried atomic.Int64
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "bench"}}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := createRetrying(ctx, client.CoreV1().Pods("bench"), pod, &retried)
			if (err != nil) != tc.wantErr || retried.Load() != tc.wantRetried {
				t.Fatalf("err %v, retried %d; want error %v, retried %d", err, retried.Load(), tc.wantErr, tc.wantRetried)
			}
		})
	}
}
