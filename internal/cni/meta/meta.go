package meta

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/pkg/ns"
	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	nadutils "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/utils"
	corev1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/rdmanet/rdmanet/internal/daemon/inproc/nsguard"
	"github.com/rdmanet/rdmanet/internal/devinfo"
	"github.com/rdmanet/rdmanet/internal/netops"
)

// Args are the CNI call's parameters.
type Args struct {
	ContainerID string
	Netns       string
	IfName      string
	Args        string // CNI_ARGS
	Path        string // CNI_PATH
}

// k8sArgs are the Kubernetes keys of CNI_ARGS (ParsePodArgs).
type k8sArgs struct {
	types.CommonArgs
	K8S_POD_NAME               types.UnmarshallableString //nolint:revive,stylecheck // CNI_ARGS key
	K8S_POD_NAMESPACE          types.UnmarshallableString //nolint:revive,stylecheck
	K8S_POD_INFRA_CONTAINER_ID types.UnmarshallableString //nolint:revive,stylecheck
	K8S_POD_UID                types.UnmarshallableString //nolint:revive,stylecheck
}

// liveReader is a Source with a cache that can also read the API server directly.
type liveReader interface {
	PodLive(ctx context.Context, namespace, name string) (*corev1.Pod, error)
}

// Plugin runs the meta CNI verbs.
type Plugin struct {
	Conf    *NetConf
	Source  Source
	Devices DeviceLister
	CNI     *libcni.CNIConfig
	Log     *slog.Logger
	// AsyncStatus, when set, writes network-status after ADD returns (the
	// daemon's StatusWriter); nil writes it before ADD returns (per call).
	AsyncStatus AsyncStatusWriter
	// Exec runs the plugins of retries outside a call (nil: processes).
	Exec invoke.Exec
	// Observer, when set, counts DEL attempts, releases and recovered
	// panics (the daemon's metrics).
	Observer Observer
	// RetryBackoff and RetryMaxBackoff space the retries of a pending DEL
	// (defaults DefaultRetryBackoff, DefaultRetryMaxBackoff).
	RetryBackoff, RetryMaxBackoff time.Duration
	// Now is for tests; defaults to time.Now.
	Now func() time.Time
}

// AsyncStatusWriter writes network-status after ADD has answered the
// runtime (internal/daemon's StatusWriter): it must not block.
type AsyncStatusWriter interface {
	// Submit queues the write of status on pod ns/name, with its UID as a
	// precondition, for container containerID, and then of the claims'
	// device status; a newer Submit of the pod supersedes it.
	Submit(containerID, ns, name string, uid k8stypes.UID, status []devinfo.NetworkStatus, claims ...ClaimNetwork)
	// Cancel drops the container's pending write (its DEL has started).
	Cancel(containerID string)
}

// NewCNI builds the libcni runner: plugins from binDir (and CNI_PATH),
// results cached under cniDir, run by exec (nil: as processes).
func NewCNI(conf *NetConf, cniPath string, exec invoke.Exec) *libcni.CNIConfig {
	paths := []string{conf.BinDir}
	for _, p := range filepath.SplitList(cniPath) {
		if p != "" && p != conf.BinDir {
			paths = append(paths, p)
		}
	}
	return libcni.NewCNIConfigWithCacheDir(paths, filepath.Join(conf.CNIDir, "libcni"), exec)
}

// Record is what ADD leaves in the cache for DEL: enough to undo every
// delegate without the pod, the NADs or the API server.
type Record struct {
	ContainerID string `json:"containerID"`
	Netns       string `json:"netns"`
	Pod         string `json:"pod"` // namespace/name
	PodUID      string `json:"podUID"`
	CNIArgs     string `json:"cniArgs"`
	// CNIPath is the call's CNI_PATH, for retries outside a call.
	CNIPath   string      `json:"cniPath,omitempty"`
	Delegates []*Delegate `json:"delegates"` // default first, attachments in order
	// Pending is set when a DEL (or an ADD's rollback) could not remove
	// every delegate: Delegates then holds only those left (see del.go).
	Pending *Pending `json:"pending,omitempty"`
	// Added counts the delegates this ADD started, for its own rollback.
	// It is not persisted: after a crash DEL undoes every delegate of the
	// record, which CNI DEL semantics make safe for ones never added.
	Added   int       `json:"-"`
	Created time.Time `json:"created"`
}

func (p *Plugin) cachePath(containerID string) string {
	return filepath.Join(p.Conf.CNIDir, "cache", containerID+".json")
}

func (p *Plugin) saveRecord(r *Record) error {
	if err := p.privateCacheDir(); err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode cache: %w", err)
	}
	return writeAtomic(p.cachePath(r.ContainerID), b)
}

func (p *Plugin) loadRecord(containerID string) (*Record, error) {
	b, err := os.ReadFile(p.cachePath(containerID))
	if err != nil {
		return nil, err
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("cache %s is corrupt: %w", p.cachePath(containerID), err)
	}
	return &r, nil
}

func (p *Plugin) runtimeConf(a Args, d *Delegate) *libcni.RuntimeConf {
	rt := &libcni.RuntimeConf{ContainerID: a.ContainerID, NetNS: a.Netns, IfName: d.IfName, CapabilityArgs: d.CapabilityArgs}
	for _, kv := range strings.Split(a.Args, ";") {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			rt.Args = append(rt.Args, [2]string{k, v})
		}
	}
	if rt.Args == nil {
		rt.Args = [][2]string{}
	}
	rt.Args = append(rt.Args, d.CNIArgs...)
	return rt
}

func (p *Plugin) waitReady(ctx context.Context) error {
	f := p.Conf.ReadinessIndicatorFile
	if f == "" {
		return nil
	}
	deadline := time.Now().Add(p.Conf.APITimeoutDur)
	for {
		if _, err := os.Stat(f); err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("default network not ready: readiness indicator file %s does not exist; fix: check the default CNI's pods on this node", f)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Add attaches the default network and every requested attachment. On any
// failure it removes what it added, in reverse, and returns the error; what
// the rollback cannot remove stays recorded for a retry, as with DEL.
func (p *Plugin) Add(ctx context.Context, c Call) (types.Result, error) {
	start := time.Now()
	if err := c.checked("ADD"); err != nil {
		return nil, err
	}
	a := c.Args
	if err := p.waitReady(ctx); err != nil {
		return nil, atStep(ReasonNotReady, err)
	}
	unlock, err := p.lockContainer(ctx, a.ContainerID)
	if err != nil {
		return nil, types.NewError(types.ErrTryAgainLater, fmt.Sprintf("ADD container %s: %v", a.ContainerID, err), "")
	}
	defer unlock()
	if err := p.finishPending(ctx, a.ContainerID); err != nil {
		return nil, atStep(ReasonPendingDel, err)
	}
	resolveStart := time.Now()
	ns, name, uid := c.Pod.Namespace, c.Pod.Name, string(c.Pod.UID)
	rec := &Record{ContainerID: a.ContainerID, Netns: a.Netns, CNIArgs: a.Args, CNIPath: a.Path, Created: p.now()}
	defList, err := p.defaultNetwork(ctx)
	if err != nil {
		return nil, atStep(ReasonNetwork, err)
	}
	// The runtime's capability args (portMappings, bandwidth, ...) go to the
	// cluster network, as Multus passes them to its master plugin; libcni
	// hands each plugin of the list only the capabilities it declares.
	def := &Delegate{Network: defList.Name, IfName: a.IfName, Conf: defList.Bytes, IsDefault: true, CapabilityArgs: copyMap(p.Conf.RuntimeConfig)}
	rec.Delegates = append(rec.Delegates, def)

	var podUID k8stypes.UID
	if name != "" {
		rec.Pod = ns + "/" + name
		actx, cancel := context.WithTimeout(ctx, p.Conf.APITimeoutDur)
		pod, err := p.Source.Pod(actx, ns, name)
		cancel()
		if err != nil {
			return nil, atStep(ReasonPod, fmt.Errorf("ADD %s: %w", rec.Pod, err))
		}
		if uid != "" && string(pod.UID) != uid {
			// A cache may still hold the previous pod of that name: ask
			// the API server before concluding the pod was recreated.
			if ls, ok := p.Source.(liveReader); ok {
				actx, cancel := context.WithTimeout(ctx, p.Conf.APITimeoutDur)
				pod, err = ls.PodLive(actx, ns, name)
				cancel()
				if err != nil {
					return nil, atStep(ReasonPod, fmt.Errorf("ADD %s: %w", rec.Pod, err))
				}
			}
		}
		if uid != "" && string(pod.UID) != uid {
			return nil, atStep(ReasonPod, fmt.Errorf("ADD %s: the pod was deleted and recreated during ADD (CNI_ARGS uid %s, API uid %s); kubelet will retry with the new pod", rec.Pod, uid, pod.UID))
		}
		podUID = pod.UID
		rec.PodUID = string(pod.UID)
		atts, err := p.attachments(ctx, pod)
		if err != nil {
			return nil, err // attachments marks the step
		}
		rec.Delegates = append(rec.Delegates, atts...)
	}
	p.observeStep(StepResolve, resolveStart)
	// The cache goes down before anything is added: a crash from here on
	// leaves DEL enough to undo it.
	if err := p.saveRecord(rec); err != nil {
		return nil, atStep(ReasonCache, err)
	}
	success := false
	defer func() {
		if success {
			return
		}
		// roll back in reverse, including a half-added delegate
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.Conf.DelTimeoutDur)
		defer cancel()
		started := rec.Delegates[:rec.Added]
		rec.Delegates = started
		if derr := p.delRecord(dctx, a, rec, PhaseRollback); derr != nil {
			p.Log.Error("rollback: DEL failed", "container", a.ContainerID, "err", derr)
		}
	}()
	delegatesStart := time.Now()
	results, err := p.addDelegates(ctx, a, rec)
	if err != nil {
		return nil, err // addOne marks the step
	}
	if err := p.applyDefaultRoute(a, rec); err != nil {
		return nil, atStep(ReasonRoute, err)
	}
	p.observeStep(StepDelegates, delegatesStart)
	if name != "" {
		statuses, err := p.statuses(rec, results)
		if err != nil {
			return nil, atStep(ReasonStatus, err)
		}
		claims, err := claimNetworks(rec, results)
		if err != nil {
			return nil, atStep(ReasonStatus, fmt.Errorf("ADD %s: %w", rec.Pod, err))
		}
		if p.AsyncStatus != nil {
			p.AsyncStatus.Submit(a.ContainerID, ns, name, podUID, statuses, claims...)
		} else {
			statusStart := time.Now()
			actx, cancel := context.WithTimeout(ctx, p.Conf.APITimeoutDur)
			err = p.Source.SetNetworkStatus(actx, ns, name, podUID, statuses)
			cancel()
			if err != nil {
				return nil, atStep(ReasonStatus, fmt.Errorf("ADD %s: %w", rec.Pod, err))
			}
			p.writeClaimNetworks(ctx, claims)
			p.observeStep(StepStatus, statusStart)
		}
	}
	res, err := results[0].GetAsVersion(p.Conf.CNIVersion)
	if err != nil {
		return nil, fmt.Errorf("ADD %s: convert the default network's result to %s: %w", podOrContainer(rec), p.Conf.CNIVersion, err)
	}
	success = true
	p.Log.Info("ADD done", "pod", rec.Pod, "container", a.ContainerID, "networks", len(rec.Delegates), "ms", time.Since(start).Milliseconds())
	return res, nil
}

// writeClaimNetworks writes the claims' device status once, for a per-call
// plugin (the daemon's StatusWriter retries). The status tells users what
// the pod got; the pod's network does not depend on it, so a failure is
// logged, not returned.
func (p *Plugin) writeClaimNetworks(ctx context.Context, claims []ClaimNetwork) {
	cs, ok := p.Source.(ClaimStatusSetter)
	if len(claims) == 0 || !ok {
		return
	}
	actx, cancel := context.WithTimeout(ctx, p.Conf.APITimeoutDur)
	defer cancel()
	if err := cs.SetClaimNetworks(actx, claims); err != nil {
		p.Log.Warn("ResourceClaim network data not written; the pod's network is up", "err", err)
	}
}

func copyMap(m map[string]any) map[string]any {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func podOrContainer(r *Record) string {
	if r.Pod != "" {
		return r.Pod
	}
	return "container " + r.ContainerID
}

func (p *Plugin) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

func (p *Plugin) addDelegate(ctx context.Context, a Args, d *Delegate) (types.Result, error) {
	l, err := libcni.ConfListFromBytes(d.Conf)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	res, err := p.CNI.AddNetworkList(ctx, l, p.runtimeConf(a, d))
	if c := CallObserverOf(p.Observer); c != nil {
		c.Delegate("ADD", chainType(l), d.IsDefault, time.Since(start), err)
	}
	return res, err
}

// maxConcurrentDelegates bounds the plugin processes one ADD runs at once
// with concurrentNetworks.
const maxConcurrentDelegates = 8

// addDelegates runs every delegate of the record and returns their results
// in record order. By default they run one after the other, default network
// first (Multus' order); with concurrentNetworks they run at once, since
// each creates its own interface in the pod. rec.Added counts the delegates
// started, for the caller's rollback.
func (p *Plugin) addDelegates(ctx context.Context, a Args, rec *Record) ([]types.Result, error) {
	start := time.Now()
	results := make([]types.Result, len(rec.Delegates))
	if !p.Conf.ConcurrentNetworks || len(rec.Delegates) < 2 {
		for i, d := range rec.Delegates {
			rec.Added++
			res, err := p.addOne(ctx, a, rec, d)
			if err != nil {
				return nil, err
			}
			results[i] = res
		}
		p.Log.Debug("delegates added", "container", a.ContainerID, "concurrent", false, "ms", time.Since(start).Milliseconds())
		return results, nil
	}
	rec.Added = len(rec.Delegates)
	errs := make([]error, len(rec.Delegates))
	sem := make(chan struct{}, maxConcurrentDelegates)
	var wg sync.WaitGroup
	for i, d := range rec.Delegates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			// a panic on this goroutine is beyond the daemon's per-request
			// recover: make it this delegate's error
			defer func() {
				if r := recover(); r != nil {
					errs[i] = p.recovered(fmt.Sprintf("ADD %s: network %s", podOrContainer(rec), d.Network), r)
				}
			}()
			results[i], errs[i] = p.addOne(ctx, a, rec, d)
		}()
	}
	wg.Wait()
	var failed multiError
	for _, err := range errs {
		if err != nil {
			failed = append(failed, err)
		}
	}
	switch len(failed) {
	case 0:
	case 1:
		return nil, failed[0]
	default:
		return nil, failed
	}
	p.Log.Debug("delegates added", "container", a.ContainerID, "concurrent", true, "ms", time.Since(start).Milliseconds())
	return results, nil
}

func (p *Plugin) addOne(ctx context.Context, a Args, rec *Record, d *Delegate) (types.Result, error) {
	t0 := time.Now()
	res, err := p.addDelegate(ctx, a, d)
	if err != nil {
		what := "default network " + d.Network
		if !d.IsDefault {
			what = "network " + d.Network + " (" + d.IfName + ")"
		}
		if cerr := ctx.Err(); cerr != nil {
			return nil, atStep(ReasonTimeout, fmt.Errorf("ADD %s: %s: stopped at the call's time limit (%v; addTimeout, or the shim's deadline): %w", podOrContainer(rec), what, cerr, err))
		}
		return nil, atStep(ReasonDelegate, fmt.Errorf("ADD %s: %s: %w", podOrContainer(rec), what, err))
	}
	p.Log.Debug("delegate added", "container", a.ContainerID, "network", d.Network, "ifname", d.IfName, "ms", time.Since(t0).Milliseconds())
	return res, nil
}

// PanicError is a recovered panic: the value, and the stack where it
// happened (logged; the CNI error carries the value only).
type PanicError struct {
	Where string
	Value any
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("%s: internal error (panic: %v); the stack is in the rdmanet log", e.Where, e.Value)
}

// recovered turns a recovered panic value into a *PanicError, logs it with
// its stack (a panic raised again from a netns callback keeps that
// callback's stack) and counts it.
func (p *Plugin) recovered(where string, r any) error {
	return RecoverPanic(p.Log, p.Observer, where, r)
}

// RecoverPanic is recovered for a caller without a Plugin (the daemon's
// connections, its DEL retries, its network-status writes).
func RecoverPanic(log *slog.Logger, obs Observer, where string, r any) error {
	e := &PanicError{Where: where, Value: r, Stack: debug.Stack()}
	if np, ok := r.(*nsguard.Panic); ok {
		e.Value, e.Stack = np.Value, np.Stack
	}
	log.Error("panic recovered", "where", where, "panic", fmt.Sprint(e.Value), "stack", string(e.Stack))
	if obs != nil {
		obs.Panic(where)
	}
	return e
}

// multiError is several delegates failing in one concurrent ADD, in record order.
type multiError []error

func (m multiError) Error() string {
	s := make([]string, len(m))
	for i, err := range m {
		s[i] = err.Error()
	}
	return strings.Join(s, "; ")
}

func (m multiError) Unwrap() []error { return m }

func (p *Plugin) delDelegate(ctx context.Context, a Args, d *Delegate) error {
	l, err := libcni.ConfListFromBytes(d.Conf)
	if err != nil {
		return err
	}
	start := time.Now()
	err = p.CNI.DelNetworkList(ctx, l, p.runtimeConf(a, d))
	if c := CallObserverOf(p.Observer); c != nil {
		c.Delegate("DEL", chainType(l), d.IsDefault, time.Since(start), err)
	}
	return err
}

func (p *Plugin) statuses(rec *Record, results []types.Result) ([]devinfo.NetworkStatus, error) {
	var out []devinfo.NetworkStatus
	for i, d := range rec.Delegates {
		var dev *nadv1.DeviceInfo
		if d.DeviceID != "" {
			if d.Resource != "" && p.Conf.DeviceInfoDir != "" {
				info, err := devinfo.Read(p.Conf.DeviceInfoDir, d.Resource, d.DeviceID)
				if err != nil {
					p.Log.Warn("device-info unreadable; network-status carries the PCI address only", "err", err)
				}
				dev = info
			}
			if dev == nil {
				dev = devinfo.PCI(d.DeviceID, "", "")
			}
		}
		name := d.Network
		isDefault := d.IsDefault && !rec.defaultMoved() || len(d.DefaultRoute) > 0
		sts, err := nadutils.CreateNetworkStatuses(results[i], name, isDefault, dev)
		if err != nil {
			return nil, fmt.Errorf("network-status for %s: %w", d.Network, err)
		}
		for _, s := range sts {
			if s.Interface == "" {
				s.Interface = d.IfName
			}
			out = append(out, devinfo.NetworkStatus{NetworkStatus: *s, InfiniBand: devinfo.InfiniBandOf(d.Conf, s.Mac)})
		}
	}
	return out, nil
}

// Check passes CHECK to every delegate with its cached result.
func (p *Plugin) Check(ctx context.Context, c Call) error {
	if err := c.checked("CHECK"); err != nil {
		return err
	}
	a := c.Args
	rec, err := p.loadRecord(a.ContainerID)
	if err != nil {
		return fmt.Errorf("CHECK container %s: no cache from ADD: %w", a.ContainerID, err)
	}
	if rec.Pending != nil {
		return fmt.Errorf("CHECK %s: the container was deleted and its DEL is still pending: %s", podOrContainer(rec), rec.Pending.LastError)
	}
	for _, d := range rec.Delegates {
		l, err := libcni.ConfListFromBytes(d.Conf)
		if err != nil {
			return err
		}
		if err := p.CNI.CheckNetworkList(ctx, l, p.runtimeConf(a, d)); err != nil {
			return fmt.Errorf("CHECK %s: network %s (%s): %w", podOrContainer(rec), d.Network, d.IfName, err)
		}
	}
	return nil
}

// Status passes STATUS to the default network.
func (p *Plugin) Status(ctx context.Context) error {
	if err := p.waitReady(ctx); err != nil {
		return err
	}
	l, err := p.defaultNetwork(ctx)
	if err != nil {
		return err
	}
	return p.CNI.GetStatusNetworkList(ctx, l)
}

// defaultMoved reports whether an attachment asked for the default route.
func (r *Record) defaultMoved() bool {
	for _, d := range r.Delegates {
		if len(d.DefaultRoute) > 0 {
			return true
		}
	}
	return false
}

// applyDefaultRoute moves the pod's default route to the attachment that
// asked for it with "default-route" (NPWG gateway selection). Without such
// a request the default route stays where the default network put it, and
// the training network gets none.
func (p *Plugin) applyDefaultRoute(a Args, rec *Record) error {
	for _, d := range rec.Delegates {
		if len(d.DefaultRoute) == 0 {
			continue
		}
		var gws []net.IP
		for _, g := range d.DefaultRoute {
			gws = append(gws, net.ParseIP(g))
		}
		err := nsguard.WithNetNSPath(a.Netns, func(ns.NetNS) error { return netops.SetDefaultRoute(d.IfName, gws) })
		if err != nil {
			return fmt.Errorf("ADD %s: default-route %v on %s (%s): %w", podOrContainer(rec), d.DefaultRoute, d.IfName, d.Network, err)
		}
		p.Log.Info("default route moved", "container", a.ContainerID, "ifname", d.IfName, "gateways", d.DefaultRoute)
	}
	return nil
}
