// The daemon-wide limit on CNI calls in flight.

package sockserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/types"
)

// The rdmanet-daemon flags that set Limits (named in refusals).
const (
	FlagMaxInFlight = "max-inflight-calls"
	FlagDelReserve  = "del-reserved-calls"
	FlagMaxQueued   = "max-queued-calls"
	FlagMaxWait     = "max-queue-wait"
)

// Defaults of Limits.
//
// 64 calls in flight: a call in flight costs the daemon about 70 KiB and
// 4 goroutines (docs/benchmarks.md, Attachment burst: 70 → 90 MiB from 64
// to 256 pods at once), and attaching more at once gains nothing: on the
// measured node the attach time grows with the burst (a node's netlink,
// API client and CPU are shared), so 64 keeps the daemon near its 64-pod
// figure while covering any real node (kubelet's default max-pods is 110;
// a GPU node runs a handful of pods, starting them at once at most).
//
// 16 of them for DEL and GC only: teardown frees VFs and addresses and is
// short (from the cache, delTimeout 30 s), so a burst of ADDs, which
// holds at most 48, never delays it.
//
// 512 ADDs waiting, at most 60 s each: a waiting call costs a goroutine,
// its socket and its request (a few KiB), a few MiB for a full queue
// (docs/benchmarks.md, 512 × 1: 73.1 MiB peak RSS with up to 464 ADDs waiting). 60 s
// is half of the shim's addTimeout (2 m, kubelet's
// runtime-request-timeout), and a call waits at most half of the wait its
// client allows, so a call that waited has the other half to run. 48 + 512
// ADDs absorb a 512-pod burst without a refusal (the largest: with 256
// and 30 s the same burst had 169 ADDs refused); past that, or
// when a node needs over a minute to reach a waiting call, the call is
// refused with CNI error 11 and the runtime retries it.
const (
	DefaultMaxInFlight = 64
	DefaultDelReserve  = 16
	DefaultMaxQueued   = 512
	DefaultMaxWait     = 60 * time.Second
)

// Limits bound the daemon's CNI calls in flight, over all its sockets.
type Limits struct {
	// MaxInFlight is how many calls run at once (0: no limit).
	MaxInFlight int
	// DelReserve of them are only for DEL and GC: ADD and CHECK hold at
	// most MaxInFlight-DelReserve.
	DelReserve int
	// MaxQueued ADD and CHECK calls wait for a slot; one more is refused
	// at once. DEL and GC wait unbounded by it (teardown is never refused
	// for a burst; the sockets' connection cap bounds them).
	MaxQueued int
	// MaxWait is the longest wait for a slot (a call also waits at most
	// half of its client's wait).
	MaxWait time.Duration
}

// DefaultLimits are rdmanet-daemon's defaults.
func DefaultLimits() Limits {
	return Limits{MaxInFlight: DefaultMaxInFlight, DelReserve: DefaultDelReserve, MaxQueued: DefaultMaxQueued, MaxWait: DefaultMaxWait}
}

// Validate names the flag of a value the limiter cannot work with.
func (l Limits) Validate() error {
	switch {
	case l.MaxInFlight < 0:
		return fmt.Errorf("--%s=%d: must be 0 (no limit) or more; fix: set it to the calls the daemon may run at once, e.g. %d", FlagMaxInFlight, l.MaxInFlight, DefaultMaxInFlight)
	case l.MaxInFlight == 0:
		return nil // no limit: the other values do not apply
	case l.DelReserve < 0 || l.DelReserve >= l.MaxInFlight:
		return fmt.Errorf("--%s=%d: must be at least 0 and below --%s=%d (ADDs need a slot too); fix: e.g. --%s=%d", FlagDelReserve, l.DelReserve, FlagMaxInFlight, l.MaxInFlight, FlagDelReserve, max(l.MaxInFlight/4, 0))
	case l.MaxQueued < 0:
		return fmt.Errorf("--%s=%d: must be 0 (no waiting: refuse at once) or more", FlagMaxQueued, l.MaxQueued)
	case l.MaxQueued > 0 && l.MaxWait <= 0:
		return fmt.Errorf("--%s=%v: must be above 0 when calls may wait (--%s=%d); fix: e.g. --%s=%v", FlagMaxWait, l.MaxWait, FlagMaxQueued, l.MaxQueued, FlagMaxWait, DefaultMaxWait)
	}
	return nil
}

// Class is how the limiter counts a call.
type Class int

const (
	// Free calls take no slot: they do no CNI work (STATUS, VERSION, an
	// empty or unreadable request, which the handler answers at once).
	Free Class = iota
	// Setup is ADD, CHECK and any other verb that does work.
	Setup
	// Teardown is DEL and GC, which have slots of their own.
	Teardown
)

// ClassOf is the class of a CNI verb.
func ClassOf(command string) Class {
	switch command {
	case "DEL", "GC":
		return Teardown
	case "", "STATUS", "VERSION":
		return Free
	}
	return Setup
}

// String is the class as a metric label: "add" or "del".
func (c Class) String() string {
	switch c {
	case Setup:
		return "add"
	case Teardown:
		return "del"
	}
	return "free"
}

// Reasons of a refusal (metric label values).
const (
	ReasonQueueFull = "queue_full" // MaxQueued ADD/CHECK calls were waiting
	ReasonWait      = "wait"       // no slot within its wait
	ReasonStopping  = "stopping"   // the daemon stopped while it waited
)

// Call is what the limiter knows of a call.
type Call struct {
	Command     string
	ContainerID string
	// Timeout is how long its client waits (0: unknown); the call waits for
	// a slot at most half of it.
	Timeout time.Duration
}

// RejectedError is a call the limiter refused: CNI error 11 (try again
// later), whose message names the limit, its flag and the fix.
type RejectedError struct {
	Reason string
	CNI    *types.Error
}

func (e *RejectedError) Error() string { return e.CNI.Msg }

// Limiter is the daemon-wide limit on CNI calls in flight, shared by the
// daemon's sockets. Calls of a container that already holds a slot take
// none: a delegate plugin exec'd by a call in flight hands its call to the
// plugin socket, and making it wait for the slot its parent holds would
// deadlock a full daemon.
type Limiter struct {
	lim Limits
	log *slog.Logger

	mu       sync.Mutex
	held     [3]int            // by class
	queue    [3][]*waiter      // FIFO, by class
	holders  map[string]int    // containers with slots held, and how many
	rejected map[[2]string]int // by class and reason
	nested   int               // calls admitted without a slot under a holder
}

type waiter struct {
	ready   chan struct{} // closed once granted
	granted bool
	id      string
}

// NewLimiter returns a limiter of l (an error names a bad flag). log gets
// one line per refused call (nil: none).
func NewLimiter(l Limits, log *slog.Logger) (*Limiter, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Limiter{lim: l, log: log, holders: map[string]int{}, rejected: map[[2]string]int{}}, nil
}

// Limits are the limiter's limits.
func (l *Limiter) Limits() Limits { return l.lim }

// Admit takes a slot for call, waiting for one within its bounds. It
// returns the slot's release (call it exactly once when the call has
// ended; later calls are no-ops) and how long the call waited, or a
// *RejectedError. ctx is the server's: when it ends, waiting calls are
// refused.
func (l *Limiter) Admit(ctx context.Context, call Call) (release func(), waited time.Duration, err error) {
	class := ClassOf(call.Command)
	if l == nil || l.lim.MaxInFlight <= 0 || class == Free {
		return func() {}, 0, nil
	}
	l.mu.Lock()
	if call.ContainerID != "" && l.holders[call.ContainerID] > 0 {
		l.nested++
		l.mu.Unlock()
		return func() {}, 0, nil
	}
	if len(l.queue[class]) == 0 && l.fits(class) {
		l.take(class, call.ContainerID)
		l.mu.Unlock()
		return l.releaser(class, call.ContainerID), 0, nil
	}
	if class == Setup && len(l.queue[class]) >= l.lim.MaxQueued {
		err := l.refuseLocked(class, ReasonQueueFull, call, 0)
		l.mu.Unlock()
		return nil, 0, err
	}
	w := &waiter{ready: make(chan struct{}), id: call.ContainerID}
	l.queue[class] = append(l.queue[class], w)
	l.mu.Unlock()

	start := time.Now()
	bound := l.lim.MaxWait
	if call.Timeout > 0 {
		bound = min(bound, call.Timeout/2)
	}
	timer := time.NewTimer(bound)
	defer timer.Stop()
	var reason string
	select {
	case <-w.ready:
		return l.releaser(class, call.ContainerID), time.Since(start), nil
	case <-timer.C:
		reason = ReasonWait
	case <-ctx.Done():
		reason = ReasonStopping
	}
	waited = time.Since(start)
	l.mu.Lock()
	if w.granted { // granted meanwhile
		if reason == ReasonWait {
			l.mu.Unlock()
			return l.releaser(class, call.ContainerID), waited, nil
		}
		l.releaseLocked(class, call.ContainerID) // stopping: give it back
	} else {
		l.queue[class] = slices.DeleteFunc(l.queue[class], func(x *waiter) bool { return x == w })
	}
	err = l.refuseLocked(class, reason, call, waited)
	l.mu.Unlock()
	return nil, waited, err
}

// fits: a slot of class is free. DEL and GC take any slot; ADD and CHECK
// leave DelReserve.
func (l *Limiter) fits(class Class) bool {
	total := l.held[Setup] + l.held[Teardown]
	if total >= l.lim.MaxInFlight {
		return false
	}
	return class == Teardown || l.held[Setup] < l.lim.MaxInFlight-l.lim.DelReserve
}

func (l *Limiter) take(class Class, id string) {
	l.held[class]++
	if id != "" {
		l.holders[id]++
	}
}

func (l *Limiter) releaser(class Class, id string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			l.releaseLocked(class, id)
			l.mu.Unlock()
		})
	}
}

// releaseLocked frees a slot and hands free slots to waiting calls, DEL
// and GC first.
func (l *Limiter) releaseLocked(class Class, id string) {
	l.held[class]--
	if id != "" {
		if l.holders[id]--; l.holders[id] <= 0 {
			delete(l.holders, id)
		}
	}
	for _, c := range []Class{Teardown, Setup} {
		for len(l.queue[c]) > 0 && l.fits(c) {
			w := l.queue[c][0]
			l.queue[c][0] = nil
			l.queue[c] = l.queue[c][1:]
			l.take(c, w.id)
			w.granted = true
			close(w.ready)
		}
	}
}

// refuseLocked counts and logs a refusal and returns its error.
func (l *Limiter) refuseLocked(class Class, reason string, call Call, waited time.Duration) error {
	l.rejected[[2]string{class.String(), reason}]++
	slots := fmt.Sprintf("%d ADD/CHECK calls in flight, the most it runs (--%s=%d less the %d slots --%s keeps for DEL)",
		l.held[Setup], FlagMaxInFlight, l.lim.MaxInFlight, l.lim.DelReserve, FlagDelReserve)
	if class == Teardown {
		slots = fmt.Sprintf("%d DEL/GC and %d ADD/CHECK calls in flight, all its slots (--%s=%d)",
			l.held[Teardown], l.held[Setup], FlagMaxInFlight, l.lim.MaxInFlight)
	}
	what := call.Command
	if call.ContainerID != "" {
		what += " of container " + call.ContainerID
	}
	var why string
	switch reason {
	case ReasonQueueFull:
		why = fmt.Sprintf("the rdmanet daemon has %s and %d more waiting (--%s=%d)", slots, len(l.queue[class]), FlagMaxQueued, l.lim.MaxQueued)
	case ReasonWait:
		why = fmt.Sprintf("it waited %v for a slot, the longest wait (--%s=%v, or half the client's wait); the rdmanet daemon has %s", waited.Round(time.Millisecond), FlagMaxWait, l.lim.MaxWait, slots)
	default:
		why = "the rdmanet daemon is stopping; it was waiting for a slot and did not run"
	}
	msg := fmt.Sprintf("rdmanet daemon: %s refused, try again later: %s", what, why)
	details := fmt.Sprintf("CNI error 11: nothing was done; the runtime retries the call. If this node starts this many pods at once, raise rdmanet-daemon's --%s or --%s (each call in flight costs the daemon about 70 KiB; rdmanet_daemon_calls_inflight, _queued and _rejected_total show the load)", FlagMaxInFlight, FlagMaxQueued)
	l.log.Warn("CNI call refused: too many calls in flight", "command", call.Command, "container", call.ContainerID, "reason", reason, "waited", waited,
		"inflight_add", l.held[Setup], "inflight_del", l.held[Teardown], "queued_add", len(l.queue[Setup]), "queued_del", len(l.queue[Teardown]))
	return &RejectedError{Reason: reason, CNI: types.NewError(types.ErrTryAgainLater, msg, details)}
}

// Stats is the limiter's state now.
type Stats struct {
	InFlight map[string]int // slots held, by class ("add", "del")
	Queued   map[string]int // calls waiting, by class
	// Rejected counts refusals by class and reason.
	Rejected map[[2]string]int
	// Nested counts calls admitted without a slot under their container's.
	Nested int
}

// Stats reads the limiter's state.
func (l *Limiter) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := Stats{InFlight: map[string]int{}, Queued: map[string]int{}, Rejected: map[[2]string]int{}, Nested: l.nested}
	for _, c := range []Class{Setup, Teardown} {
		s.InFlight[c.String()] = l.held[c]
		s.Queued[c.String()] = len(l.queue[c])
	}
	for k, v := range l.rejected {
		s.Rejected[k] = v
	}
	return s
}

// IsRejected reports whether err is a refusal of the limiter.
func IsRejected(err error) bool {
	var r *RejectedError
	return errors.As(err, &r)
}

// limiterKey carries a Limiter in a context (WithLimiter).
type limiterKey struct{}

// WithLimiter returns ctx carrying l: every Server serving under ctx
// without a Limiter of its own takes l. rdmanet-daemon's meta socket gets
// the daemon-wide limiter this way (its server is built in
// internal/daemon/metaserver.go).
func WithLimiter(ctx context.Context, l *Limiter) context.Context {
	return context.WithValue(ctx, limiterKey{}, l)
}

// LimiterFrom is the Limiter of ctx (nil: none).
func LimiterFrom(ctx context.Context) *Limiter {
	l, _ := ctx.Value(limiterKey{}).(*Limiter)
	return l
}
