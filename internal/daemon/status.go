package daemon

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/rdmanet/rdmanet/internal/cni/meta"
	"github.com/rdmanet/rdmanet/internal/devinfo"
)

// StatusWriter is the daemon's meta.AsyncStatusWriter: it writes the
// network-status annotation after ADD has answered the runtime, so the API
// round trip is off the pod's start path (a per-call plugin writes before
// it exits). Transient API errors are retried with backoff until MaxAge; a
// pod that is gone or was recreated (UID precondition) is not retried. DEL
// of the container cancels its pending write, and a newer ADD of the same
// pod supersedes an older one. MetaServer.Serve waits for its writes
// (Close) when the daemon stops.
type StatusWriter struct {
	Source meta.Source
	Log    *slog.Logger
	// Timeout bounds one write (default meta.DefaultAPITimeout).
	Timeout time.Duration
	// MaxAge bounds all attempts of one write (default 2m).
	MaxAge time.Duration
	// Backoff is the first retry delay, doubled up to 5s (default 100ms).
	Backoff time.Duration
	// Observer counts recovered panics and, when it is a CallObserver,
	// finished writes with their attempts (nil: logs only).
	Observer meta.Observer

	mu      sync.Mutex
	pending map[string]*statusJob // by container ID
	byPod   map[string]string     // ns/name -> container ID of its newest job
	wg      sync.WaitGroup
}

type statusJob struct {
	pod    string
	cancel context.CancelFunc
}

// Submit queues the write of status on pod ns/name (with its UID as a
// precondition) for container containerID and returns at once. claims, if
// any, are written to their ResourceClaims' status after the pod's
// network-status (when the Source is a meta.ClaimStatusSetter).
func (w *StatusWriter) Submit(containerID, ns, name string, uid k8stypes.UID, status []devinfo.NetworkStatus, claims ...meta.ClaimNetwork) {
	pod := ns + "/" + name
	ctx, cancel := context.WithTimeout(context.Background(), w.maxAge())
	w.mu.Lock()
	if w.pending == nil {
		w.pending, w.byPod = map[string]*statusJob{}, map[string]string{}
	}
	if old, ok := w.pending[containerID]; ok {
		old.cancel()
	}
	if prev, ok := w.byPod[pod]; ok && prev != containerID {
		if old, ok := w.pending[prev]; ok {
			old.cancel() // a newer sandbox of the pod: its status wins
			w.Log.Info("network-status write superseded by a newer ADD of the pod", "pod", pod, "container", prev, "by", containerID)
		}
	}
	job := &statusJob{pod: pod, cancel: cancel}
	w.pending[containerID] = job
	w.byPod[pod] = containerID
	w.wg.Add(1)
	w.mu.Unlock()

	go func() {
		defer w.wg.Done()
		defer cancel()
		defer func() {
			if r := recover(); r != nil { // a daemon goroutine: never take the daemon down
				_ = meta.RecoverPanic(w.Log, w.Observer, "rdmanet daemon: network-status write of "+pod, r)
			}
		}()
		w.run(ctx, containerID, ns, name, uid, status, claims)
		w.mu.Lock()
		if w.pending[containerID] == job {
			delete(w.pending, containerID)
		}
		if w.byPod[pod] == containerID {
			delete(w.byPod, pod)
		}
		w.mu.Unlock()
	}()
}

func (w *StatusWriter) run(ctx context.Context, containerID, ns, name string, uid k8stypes.UID, status []devinfo.NetworkStatus, claims []meta.ClaimNetwork) {
	pod := ns + "/" + name
	result, attempts := w.retry(ctx, "network-status", pod, containerID, func(c context.Context) error {
		return w.Source.SetNetworkStatus(c, ns, name, uid, status)
	})
	w.observe(result, attempts)
	cs, ok := w.Source.(meta.ClaimStatusSetter)
	if result != meta.StatusWritten || len(claims) == 0 || !ok {
		return
	}
	w.retry(ctx, "ResourceClaim network data", pod, containerID, func(c context.Context) error {
		return cs.SetClaimNetworks(c, claims)
	})
}

// retry runs write until it succeeds, fails for good (the object is gone or
// was recreated), or ctx ends (DEL, a newer ADD, MaxAge), and returns how it
// ended (meta.StatusWritten, meta.StatusGone, meta.StatusCancelled, meta.StatusGaveUp) and the
// attempts made.
func (w *StatusWriter) retry(ctx context.Context, what, pod, containerID string, write func(context.Context) error) (string, int) {
	start := time.Now()
	delay := w.backoff()
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, w.timeout())
		err := write(actx)
		cancel()
		switch {
		case err == nil:
			w.Log.Debug(what+" written", "pod", pod, "container", containerID, "attempts", attempt, "ms", time.Since(start).Milliseconds())
			return meta.StatusWritten, attempt
		case permanentAPIError(err):
			w.Log.Warn(what+" not written: the object is gone or was recreated, or the write is refused (forbidden, invalid)", "pod", pod, "container", containerID, "err", err)
			return meta.StatusGone, attempt
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.Canceled) {
				w.Log.Debug(what+" write cancelled (DEL or a newer ADD)", "pod", pod, "container", containerID)
				return meta.StatusCancelled, attempt
			}
			w.Log.Error(what+" NOT written: giving up; the pod runs without it", "pod", pod, "container", containerID, "attempts", attempt, "after", time.Since(start).Round(time.Millisecond), "err", err)
			return meta.StatusGaveUp, attempt
		case <-time.After(delay):
		}
		w.Log.Warn(what+" write failed; retrying", "pod", pod, "container", containerID, "attempt", attempt, "retry_in", delay, "err", err)
		if delay *= 2; delay > 5*time.Second {
			delay = 5 * time.Second
		}
	}
}

func (w *StatusWriter) observe(result string, attempts int) {
	if c := meta.CallObserverOf(w.Observer); c != nil {
		c.StatusWrite(result, attempts)
	}
}

// Cancel drops the pending write of a container (its DEL has started).
func (w *StatusWriter) Cancel(containerID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if job, ok := w.pending[containerID]; ok {
		job.cancel()
	}
}

// Pending is the number of writes not finished yet.
func (w *StatusWriter) Pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending)
}

// Close waits for pending writes until ctx ends, then cancels the rest and
// names their pods in the log.
func (w *StatusWriter) Close(ctx context.Context) {
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	w.mu.Lock()
	var pods []string
	for _, job := range w.pending {
		pods = append(pods, job.pod)
		job.cancel()
	}
	w.mu.Unlock()
	w.Log.Error("stopping with network-status writes unfinished; these pods lack the annotation", "pods", pods)
	<-done
}

func permanentAPIError(err error) bool {
	return errors.Is(err, meta.ErrNotFound) || apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsInvalid(err) ||
		apierrors.IsForbidden(err) || apierrors.IsBadRequest(err)
}

func (w *StatusWriter) timeout() time.Duration {
	if w.Timeout > 0 {
		return w.Timeout
	}
	return meta.DefaultAPITimeout
}

func (w *StatusWriter) maxAge() time.Duration {
	if w.MaxAge > 0 {
		return w.MaxAge
	}
	return 2 * time.Minute
}

func (w *StatusWriter) backoff() time.Duration {
	if w.Backoff > 0 {
		return w.Backoff
	}
	return 100 * time.Millisecond
}
