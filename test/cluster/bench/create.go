package bench

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// createRetryPause is the pause between creation attempts.
var createRetryPause = 2 * time.Second

// createRetrying creates pod as a workload controller would: a creation
// refused for a transient reason (an admission webhook or the API server
// timing out on a saturated machine) is retried, up to 5 attempts 2 s
// apart; a pod that exists after a timed-out attempt is taken as created.
func createRetrying(ctx context.Context, pods typedcorev1.PodInterface, pod *corev1.Pod, retried *atomic.Int64) error {
	for attempt := 1; ; attempt++ {
		_, err := pods.Create(ctx, pod, metav1.CreateOptions{})
		switch {
		case err == nil:
			return nil
		case attempt > 1 && apierrors.IsAlreadyExists(err):
			return nil
		case attempt >= 5 || !transientCreateError(err):
			return fmt.Errorf("pod %s (attempt %d): %w", pod.Name, attempt, err)
		}
		retried.Add(1)
		select {
		case <-ctx.Done():
			return fmt.Errorf("pod %s: %w (after %v)", pod.Name, ctx.Err(), err)
		case <-time.After(createRetryPause):
		}
	}
}

// transientCreateError: a timeout of the API server or of an admission
// webhook it calls (failurePolicy Fail turns the webhook's into an internal
// error naming it), or throttling.
func transientCreateError(err error) bool {
	return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) ||
		(apierrors.IsInternalError(err) && strings.Contains(err.Error(), "failed calling webhook"))
}
