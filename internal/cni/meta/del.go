package meta

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/containernetworking/cni/pkg/types"
)

// DEL never forgets what it could not remove.
//
// When a delegate's DEL fails (or the DEL time limit passes before it is
// tried), the container's cache record is kept, durably, with only the
// delegates still to remove, each with its last error, and marked Pending.
// The delegates' own state (the sriov plugin's record of its VF, an IPAM
// reservation) therefore stays reachable: the record is retried by the
// daemon with backoff, by the next DEL of that container and by CNI GC, and
// removed once every delegate is gone — which is when the sriov plugin
// releases its VF.
//
// What kubelet is told: success when every delegate is gone, and also when
// some are not but the record of them is on disk (fsync'd), since then a
// later retry is certain and the pod can go (a failing DEL would keep it
// Terminating and have kubelet retry the same thing). With
// retryDeleteOnError, an incomplete DEL fails as well, so kubelet retries
// too. DEL fails when the record cannot be written (kubelet's retry is then
// the only one left), or when another call holds the container's lock.

// Pending describes a DEL that has not removed every delegate yet.
type Pending struct {
	// Since is the first DEL (or ADD rollback) that left something behind.
	Since time.Time `json:"since"`
	// Attempts counts DELs of the record so far (the first included).
	Attempts    int       `json:"attempts"`
	LastAttempt time.Time `json:"lastAttempt"`
	// NextRetry is when the daemon tries again (backoff).
	NextRetry time.Time `json:"nextRetry"`
	LastError string    `json:"lastError"`
}

// DelAttempt is one DEL of one delegate, for logs and metrics.
type DelAttempt struct {
	ContainerID string
	Network     string
	IfName      string
	// Phase is "del" (the runtime's DEL), "rollback" (a failed ADD undoing
	// itself) or "retry" (a DEL of a record an earlier DEL left pending,
	// from the runtime, GC or the daemon).
	Phase string
	// Attempt is the record's attempt number (1 for the first DEL).
	Attempt int
	Err     error
}

// Observer learns what DEL and the daemon do (metrics); every method may be
// called concurrently. Plugin.Observer may be nil.
type Observer interface {
	DelAttempt(DelAttempt)
	// Released: a pending record's last delegate is gone.
	Released(containerID string)
	// PendingRecords: how many records a retry scan found pending.
	PendingRecords(n int)
	// Panic: a request or a background job panicked and was recovered.
	Panic(where string)
}

// Retry backoff of pending records: DefaultRetryBackoff doubling per
// attempt up to DefaultRetryMaxBackoff.
const (
	DefaultRetryBackoff    = time.Second
	DefaultRetryMaxBackoff = 5 * time.Minute
)

// Phases of a delegate DEL.
const (
	PhaseDel      = "del"
	PhaseRollback = "rollback"
	PhaseRetry    = "retry"
)

func (p *Plugin) backoff(attempts int) time.Duration {
	base, max := p.RetryBackoff, p.RetryMaxBackoff
	if base <= 0 {
		base = DefaultRetryBackoff
	}
	if max <= 0 {
		max = DefaultRetryMaxBackoff
	}
	d := base
	for i := 1; i < attempts && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

func (p *Plugin) cacheDir() string { return filepath.Join(p.Conf.CNIDir, "cache") }

func (p *Plugin) removeRecord(containerID string) {
	if err := os.Remove(p.cachePath(containerID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		p.Log.Warn("cannot remove cache", "container", containerID, "err", err)
	}
}

// Del removes every delegate of the container: from our cache when present,
// else from libcni's attachment cache. It is bounded by delTimeout; what it
// could not remove stays recorded for a retry (see the comment above).
func (p *Plugin) Del(ctx context.Context, c Call) error {
	if err := c.checked("DEL"); err != nil {
		return err
	}
	a := c.Args
	ctx, cancel := context.WithTimeout(ctx, p.Conf.DelTimeoutDur)
	defer cancel()
	if p.AsyncStatus != nil {
		p.AsyncStatus.Cancel(a.ContainerID)
	}
	unlock, err := p.lockContainer(ctx, a.ContainerID)
	if err != nil {
		return types.NewError(types.ErrTryAgainLater, fmt.Sprintf("DEL container %s: %v", a.ContainerID, err), "")
	}
	defer unlock()
	rec, err := p.loadRecord(a.ContainerID)
	switch {
	case err == nil:
	case errors.Is(err, os.ErrNotExist):
		rec = p.recordFromLibcniCache(a)
	default:
		p.Log.Warn("cache unreadable; falling back to libcni's attachment cache", "container", a.ContainerID, "err", err)
		rec = p.recordFromLibcniCache(a)
	}
	if rec == nil || len(rec.Delegates) == 0 {
		p.removeRecord(a.ContainerID)
		return nil
	}
	if a.Netns == "" {
		a.Netns = rec.Netns
	}
	phase := PhaseDel
	if rec.Pending != nil {
		phase = PhaseRetry
	}
	return p.delRecord(ctx, a, rec, phase)
}

// delRecord DELs rec's delegates in reverse order, going on past failures,
// and removes the record, or keeps what is left of it pending. The caller
// holds the container's lock.
func (p *Plugin) delRecord(ctx context.Context, a Args, rec *Record, phase string) error {
	failed := p.delAll(ctx, a, rec, rec.Delegates, phase)
	if len(failed) == 0 {
		if rec.Pending != nil {
			p.Log.Info("pending DEL completed: every delegate is removed, the container's resources are released", "container", rec.ContainerID, "pod", rec.Pod,
				"attempts", rec.Pending.Attempts+1, "pending_for", p.now().Sub(rec.Pending.Since).Round(time.Millisecond))
			if p.Observer != nil {
				p.Observer.Released(rec.ContainerID)
			}
		}
		p.removeRecord(rec.ContainerID)
		return nil
	}
	summary := leakSummary(failed)
	if err := p.keepPending(rec, failed); err != nil {
		return atStep(ReasonCache, fmt.Errorf("DEL %s: %s; and the record of what is left could not be kept for a retry (%w), so DEL fails and kubelet retries it", podOrContainer(rec), summary, err))
	}
	p.Log.Error("DEL incomplete: what is left is recorded and will be retried (the daemon retries with backoff; so do the next DEL and CNI GC of this container)",
		"container", rec.ContainerID, "pod", rec.Pod, "phase", phase, "attempt", rec.Pending.Attempts, "next_retry", rec.Pending.NextRetry.Format(time.RFC3339), "left", summary)
	if p.Conf.RetryDeleteOnError && ctx.Err() == nil {
		return atStep(ReasonDelegate, fmt.Errorf("DEL %s: %s (recorded for a retry)", podOrContainer(rec), summary))
	}
	return nil
}

func leakSummary(failed []*Delegate) string {
	s := make([]string, len(failed))
	for i, d := range failed {
		s[i] = fmt.Sprintf("%s (%s): %s", d.Network, d.IfName, d.DelError)
	}
	return strings.Join(s, "; ")
}

// delAll DELs dels in reverse order, past failures, and returns those that
// failed, in record order, each with DelError set.
func (p *Plugin) delAll(ctx context.Context, a Args, rec *Record, dels []*Delegate, phase string) []*Delegate {
	attempt := 1
	if rec.Pending != nil {
		attempt = rec.Pending.Attempts + 1
	}
	var failed []*Delegate
	for i := len(dels) - 1; i >= 0; i-- {
		d := dels[i]
		var err error
		if ctx.Err() != nil {
			err = fmt.Errorf("not attempted: DEL time limit %s reached", p.Conf.DelTimeoutDur)
		} else {
			err = p.delDelegate(ctx, a, d)
		}
		if p.Observer != nil {
			p.Observer.DelAttempt(DelAttempt{ContainerID: rec.ContainerID, Network: d.Network, IfName: d.IfName, Phase: phase, Attempt: attempt, Err: err})
		}
		if err != nil {
			p.Log.Warn("delegate DEL failed", "container", rec.ContainerID, "network", d.Network, "ifname", d.IfName, "phase", phase, "attempt", attempt, "err", err)
			d.DelError = err.Error()
			failed = append([]*Delegate{d}, failed...)
			continue
		}
		if phase == PhaseRetry {
			p.Log.Info("delegate DEL retry succeeded", "container", rec.ContainerID, "network", d.Network, "ifname", d.IfName, "attempt", attempt)
		}
	}
	return failed
}

// keepPending writes rec back (durably) with only the failed delegates.
func (p *Plugin) keepPending(rec *Record, failed []*Delegate) error {
	now := p.now()
	rec.Delegates = failed
	if rec.Pending == nil {
		rec.Pending = &Pending{Since: now}
	}
	rec.Pending.Attempts++
	rec.Pending.LastAttempt = now
	rec.Pending.NextRetry = now.Add(p.backoff(rec.Pending.Attempts))
	rec.Pending.LastError = leakSummary(failed)
	return p.saveRecord(rec)
}

// recordFromLibcniCache recovers the delegates of a container from libcni's
// cache (written by AddNetworkList) when our own cache is gone.
func (p *Plugin) recordFromLibcniCache(a Args) *Record {
	atts, err := p.CNI.GetCachedAttachments(a.ContainerID)
	if err != nil || len(atts) == 0 {
		p.Log.Debug("no cache for container; nothing to delete", "container", a.ContainerID, "err", err)
		return nil
	}
	// default network (the DEL's own ifname) first, others by interface name
	sort.SliceStable(atts, func(i, j int) bool {
		if (atts[i].IfName == a.IfName) != (atts[j].IfName == a.IfName) {
			return atts[i].IfName == a.IfName
		}
		return atts[i].IfName < atts[j].IfName
	})
	rec := &Record{ContainerID: a.ContainerID, Netns: a.Netns, CNIArgs: a.Args, CNIPath: a.Path, Created: p.now()}
	for _, at := range atts {
		rec.Delegates = append(rec.Delegates, &Delegate{Network: at.Network, IfName: at.IfName, Conf: at.Config, CapabilityArgs: at.CapabilityArgs, IsDefault: at.IfName == a.IfName})
	}
	return rec
}

// finishPending runs a pending DEL of the container before its ADD: a
// container ID is not reused while what its last attachment left is still
// there. The caller holds the lock.
func (p *Plugin) finishPending(ctx context.Context, containerID string) error {
	rec, err := p.loadRecord(containerID)
	if err != nil || rec.Pending == nil {
		return nil
	}
	dctx, cancel := context.WithTimeout(ctx, p.Conf.DelTimeoutDur)
	defer cancel()
	if err := p.delRecord(dctx, p.retryArgs(rec), rec, PhaseRetry); err != nil {
		return err
	}
	if _, err := os.Stat(p.cachePath(containerID)); err == nil {
		return fmt.Errorf("ADD container %s: a DEL of this container left resources behind and still cannot remove them: %s; fix: see the rdmanet log for the failing delegate", containerID, rec.Pending.LastError)
	}
	return nil
}

// retryArgs are the call parameters of a retry outside the runtime's DEL:
// the recorded ones, without a netns that no longer exists (a CNI DEL may
// have no netns).
func (p *Plugin) retryArgs(rec *Record) Args {
	a := Args{ContainerID: rec.ContainerID, Netns: rec.Netns, Args: rec.CNIArgs, Path: rec.CNIPath}
	if a.Netns != "" {
		if _, err := os.Stat(a.Netns); err != nil {
			a.Netns = ""
		}
	}
	return a
}

// RetryResult is what one pass over the pending records did.
type RetryResult struct {
	Pending  int // pending records found
	Retried  int // of them, retried now (due, not locked by a call)
	Released int // of those, fully removed
}

// RetryPending retries every pending record whose NextRetry has passed
// (every one with force), skipping containers a call holds. Each record's
// retry is bounded by delTimeout. The daemon runs it with backoff; CNI GC
// runs it with force.
func (p *Plugin) RetryPending(ctx context.Context, force bool) (RetryResult, error) {
	var res RetryResult
	entries, err := os.ReadDir(p.cacheDir())
	if errors.Is(err, os.ErrNotExist) {
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("pending DELs: %w", err)
	}
	var errs []error
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || e.IsDir() || strings.HasPrefix(id, ".") {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		rec, err := p.loadRecord(id)
		if err != nil || rec.Pending == nil {
			continue
		}
		res.Pending++
		if !force && p.now().Before(rec.Pending.NextRetry) {
			continue
		}
		unlock, ok, err := p.tryLockContainer(id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !ok {
			continue // a call has it; it will DEL or re-ADD the container itself
		}
		released, err := p.retryLocked(ctx, id)
		unlock()
		if err != nil {
			errs = append(errs, err)
		}
		res.Retried++
		if released {
			res.Released++
		}
	}
	if p.Observer != nil {
		p.Observer.PendingRecords(res.Pending - res.Released)
	}
	return res, errors.Join(errs...)
}

// retryLocked re-reads the record under the lock and retries it.
func (p *Plugin) retryLocked(ctx context.Context, id string) (bool, error) {
	rec, err := p.loadRecord(id)
	if err != nil || rec.Pending == nil {
		return err == nil, nil // gone meanwhile, or an ADD replaced it
	}
	dctx, cancel := context.WithTimeout(ctx, p.Conf.DelTimeoutDur)
	defer cancel()
	q := *p // the record's CNI_PATH, which need not be this call's
	q.CNI = NewCNI(p.Conf, rec.CNIPath, p.Exec)
	if err := q.delRecord(dctx, q.retryArgs(rec), rec, PhaseRetry); err != nil {
		return false, err
	}
	_, err = os.Stat(p.cachePath(id))
	return errors.Is(err, os.ErrNotExist), nil
}

// GC retries every pending record now (CNI GC; the runtime's libcni has
// already DELed the attachments it no longer considers valid).
func (p *Plugin) GC(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.Conf.DelTimeoutDur)
	defer cancel()
	res, err := p.RetryPending(ctx, true)
	if res.Pending > 0 {
		p.Log.Info("GC: retried pending DELs", "pending", res.Pending, "retried", res.Retried, "released", res.Released)
	}
	return err
}

// --- per-container lock -------------------------------------------------------

// lockPath is the container's lock file: it serialises the runtime's calls,
// the daemon's retries and calls of other processes (rdmanet-direct) on one
// container.
func (p *Plugin) lockPath(containerID string) string {
	return filepath.Join(p.cacheDir(), containerID+".lock")
}

// lockContainer takes the container's lock, waiting until ctx ends.
func (p *Plugin) lockContainer(ctx context.Context, containerID string) (func(), error) {
	for {
		unlock, ok, err := p.tryLockContainer(containerID)
		if err != nil || ok {
			return unlock, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("another CNI call holds container %s (lock %s): %w", containerID, p.lockPath(containerID), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// tryLockContainer takes the lock if it is free. The unlock removes the lock
// file when the container has no record any more.
func (p *Plugin) tryLockContainer(containerID string) (func(), bool, error) {
	path := p.lockPath(containerID)
	if err := p.privateCacheDir(); err != nil {
		return nil, false, err
	}
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return nil, false, fmt.Errorf("lock %s: %w", path, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, false, nil
			}
			return nil, false, fmt.Errorf("lock %s: %w", path, err)
		}
		// The holder before us may have removed the file after we opened
		// it: then our lock is on a file nobody else will open.
		var fst, pst syscall.Stat_t
		if syscall.Fstat(int(f.Fd()), &fst) != nil || syscall.Stat(path, &pst) != nil || fst.Ino != pst.Ino || fst.Dev != pst.Dev {
			f.Close()
			continue
		}
		return func() {
			if _, err := os.Stat(p.cachePath(containerID)); errors.Is(err, os.ErrNotExist) {
				_ = os.Remove(path)
			}
			f.Close()
		}, true, nil
	}
}
