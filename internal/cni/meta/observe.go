package meta

import (
	"context"
	"errors"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
)

// CallObserver is what an Observer may also implement to learn each call's
// duration and outcome (the daemon's latency and error metrics). Every
// method may be called concurrently and must not block: they run on the
// CNI call's path.
type CallObserver interface {
	// Call is one CNI verb the daemon answered: how long it took from the
	// request to the answer, and its error (nil: success).
	Call(command string, d time.Duration, err error)
	// Step is one step of an ADD (StepResolve, StepDelegates, StepStatus).
	Step(step string, d time.Duration)
	// Delegate is the ADD or DEL of one delegate network (its whole plugin
	// chain); typ is the type of its first plugin, isDefault whether it is
	// the cluster network.
	Delegate(command, typ string, isDefault bool, d time.Duration, err error)
	// StatusWrite is one finished asynchronous network-status write:
	// result is a Status* constant, attempts the API writes it took.
	StatusWrite(result string, attempts int)
}

// Steps of an ADD, for CallObserver.Step.
const (
	// StepResolve: the pod, its networks (NADs) and kubelet's device IDs.
	StepResolve = "resolve"
	// StepDelegates: every delegate's plugin chain (and the default route).
	StepDelegates = "delegates"
	// StepStatus: the network-status write, when ADD waits for it
	// (--status-write=sync or the per-call plugin).
	StepStatus = "status"
)

// Results of an asynchronous network-status write.
const (
	StatusWritten   = "written"
	StatusGone      = "pod_gone"  // the pod is gone or was recreated: not retried
	StatusCancelled = "cancelled" // DEL of the container or a newer ADD of the pod
	StatusGaveUp    = "gave_up"   // transient errors until MaxAge
)

// Error reasons: the fixed set ErrorReason returns (metric label values).
const (
	ReasonConfig     = "config"      // the network config does not parse or is not supported
	ReasonNotReady   = "not_ready"   // the default network's readiness indicator file is missing
	ReasonPod        = "pod"         // the pod cannot be read, or was recreated during ADD
	ReasonNetwork    = "network"     // networks annotation, NAD or clusterNetwork resolution
	ReasonDevice     = "device"      // no device from kubelet (PodResources) for a NAD's resource
	ReasonPendingDel = "pending_del" // an earlier DEL of the container still cannot finish
	ReasonCache      = "cache"       // the container's cache record cannot be written
	ReasonDelegate   = "delegate"    // a delegate plugin failed
	ReasonRoute      = "route"       // the requested default route cannot be set
	ReasonStatus     = "status"      // the network-status annotation cannot be written
	ReasonBusy       = "busy"        // another call holds the container
	ReasonTimeout    = "timeout"     // the call's time limit passed
	ReasonPanic      = "panic"       // a recovered panic (a bug)
	ReasonOther      = "other"
)

// Reasons lists every value ErrorReason returns.
var Reasons = []string{ReasonConfig, ReasonNotReady, ReasonPod, ReasonNetwork, ReasonDevice, ReasonPendingDel, ReasonCache,
	ReasonDelegate, ReasonRoute, ReasonStatus, ReasonBusy, ReasonTimeout, ReasonPanic, ReasonOther}

// stepError marks where in a call an error arose, for ErrorReason; its
// text is the wrapped error's, unchanged.
type stepError struct {
	reason string
	err    error
}

func (e *stepError) Error() string { return e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }

// atStep wraps err (nil stays nil) with the reason it stands for.
func atStep(reason string, err error) error {
	if err == nil {
		return nil
	}
	return &stepError{reason: reason, err: err}
}

// ErrorReason classifies a call's error into one of Reasons ("" for nil):
// a bounded label for metrics, never the error's text.
func ErrorReason(err error) string {
	if err == nil {
		return ""
	}
	var pe *PanicError
	if errors.As(err, &pe) {
		return ReasonPanic
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return ReasonTimeout
	}
	var se *stepError
	if errors.As(err, &se) {
		return se.reason
	}
	var te *types.Error
	if errors.As(err, &te) {
		switch te.Code {
		case types.ErrTryAgainLater:
			return ReasonBusy
		case types.ErrInvalidNetworkConfig, types.ErrDecodingFailure, types.ErrIncompatibleCNIVersion, types.ErrUnsupportedField:
			return ReasonConfig
		}
	}
	return ReasonOther
}

// CallObserverOf is o's CallObserver, or nil.
func CallObserverOf(o Observer) CallObserver {
	if o == nil {
		return nil
	}
	c, _ := o.(CallObserver)
	return c
}

// chainType is the type of the first plugin of a delegate's config list.
func chainType(l *libcni.NetworkConfigList) string {
	if l == nil || len(l.Plugins) == 0 || l.Plugins[0].Network == nil {
		return ""
	}
	return l.Plugins[0].Network.Type
}

// observeStep reports a step's duration since start, when observed.
func (p *Plugin) observeStep(step string, start time.Time) {
	if c := CallObserverOf(p.Observer); c != nil {
		c.Step(step, time.Since(start))
	}
}

// AsCNIError keeps the whole message: skel would otherwise print only an
// inner delegate's *types.Error and drop which network and pod failed.
func AsCNIError(err error) error {
	code := uint(types.ErrInternal)
	var te *types.Error
	if errors.As(err, &te) {
		if te == err {
			return err
		}
		code = te.Code
	}
	return types.NewError(code, err.Error(), "")
}
