package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
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

// k8sArgs are the Kubernetes keys of CNI_ARGS.
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
	// Status, when set, writes network-status after ADD returns (the
	// daemon); nil writes it before ADD returns (per call).
	AsyncStatus *StatusWriter
	// Now is for tests; defaults to time.Now.
	Now func() time.Time
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
	ContainerID string      `json:"containerID"`
	Netns       string      `json:"netns"`
	Pod         string      `json:"pod"` // namespace/name
	PodUID      string      `json:"podUID"`
	CNIArgs     string      `json:"cniArgs"`
	Delegates   []*Delegate `json:"delegates"` // default first, attachments in order
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
	if err := os.MkdirAll(filepath.Dir(p.cachePath(r.ContainerID)), 0o700); err != nil {
		return fmt.Errorf("cache dir: %w", err)
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
// failure it removes what it added, in reverse, and returns the error.
func (p *Plugin) Add(ctx context.Context, a Args) (types.Result, error) {
	start := time.Now()
	if err := p.waitReady(ctx); err != nil {
		return nil, err
	}
	var ka k8sArgs
	if err := types.LoadArgs(a.Args, &ka); err != nil {
		return nil, fmt.Errorf("CNI_ARGS %q: %w", a.Args, err)
	}
	ns, name, uid := string(ka.K8S_POD_NAMESPACE), string(ka.K8S_POD_NAME), string(ka.K8S_POD_UID)
	rec := &Record{ContainerID: a.ContainerID, Netns: a.Netns, CNIArgs: a.Args, Created: p.now()}
	defList, err := p.defaultNetwork(ctx)
	if err != nil {
		return nil, err
	}
	def := &Delegate{Network: defList.Name, IfName: a.IfName, Conf: defList.Bytes, IsDefault: true}
	rec.Delegates = append(rec.Delegates, def)

	var podUID k8stypes.UID
	if name != "" {
		rec.Pod = ns + "/" + name
		actx, cancel := context.WithTimeout(ctx, p.Conf.APITimeoutDur)
		pod, err := p.Source.Pod(actx, ns, name)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("ADD %s: %w", rec.Pod, err)
		}
		if uid != "" && string(pod.UID) != uid {
			// A cache may still hold the previous pod of that name: ask
			// the API server before concluding the pod was recreated.
			if ls, ok := p.Source.(liveReader); ok {
				actx, cancel := context.WithTimeout(ctx, p.Conf.APITimeoutDur)
				pod, err = ls.PodLive(actx, ns, name)
				cancel()
				if err != nil {
					return nil, fmt.Errorf("ADD %s: %w", rec.Pod, err)
				}
			}
		}
		if uid != "" && string(pod.UID) != uid {
			return nil, fmt.Errorf("ADD %s: the pod was deleted and recreated during ADD (CNI_ARGS uid %s, API uid %s); kubelet will retry with the new pod", rec.Pod, uid, pod.UID)
		}
		podUID = pod.UID
		rec.PodUID = string(pod.UID)
		atts, err := p.attachments(ctx, pod)
		if err != nil {
			return nil, err
		}
		rec.Delegates = append(rec.Delegates, atts...)
	}
	// The cache goes down before anything is added: a crash from here on
	// leaves DEL enough to undo it.
	if err := p.saveRecord(rec); err != nil {
		return nil, err
	}
	success := false
	defer func() {
		if success {
			return
		}
		// roll back in reverse, including a half-added delegate
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.Conf.DelTimeoutDur)
		defer cancel()
		for i := rec.Added - 1; i >= 0; i-- {
			if derr := p.delDelegate(dctx, a, rec.Delegates[i]); derr != nil {
				p.Log.Error("rollback: DEL failed", "container", a.ContainerID, "network", rec.Delegates[i].Network, "err", derr)
			}
		}
		_ = os.Remove(p.cachePath(a.ContainerID))
	}()
	results, err := p.addDelegates(ctx, a, rec)
	if err != nil {
		return nil, err
	}
	if err := p.applyDefaultRoute(a, rec); err != nil {
		return nil, err
	}
	if name != "" {
		statuses, err := p.statuses(rec, results)
		if err != nil {
			return nil, err
		}
		if p.AsyncStatus != nil {
			p.AsyncStatus.Submit(a.ContainerID, ns, name, podUID, statuses)
		} else {
			actx, cancel := context.WithTimeout(ctx, p.Conf.APITimeoutDur)
			err = p.Source.SetNetworkStatus(actx, ns, name, podUID, statuses)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("ADD %s: %w", rec.Pod, err)
			}
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
	return p.CNI.AddNetworkList(ctx, l, p.runtimeConf(a, d))
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
		return nil, fmt.Errorf("ADD %s: %s: %w", podOrContainer(rec), what, err)
	}
	p.Log.Debug("delegate added", "container", a.ContainerID, "network", d.Network, "ifname", d.IfName, "ms", time.Since(t0).Milliseconds())
	return res, nil
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
	return p.CNI.DelNetworkList(ctx, l, p.runtimeConf(a, d))
}

// attachments resolves the pod's networks annotation to delegates.
func (p *Plugin) attachments(ctx context.Context, pod *corev1.Pod) ([]*Delegate, error) {
	podKey := pod.Namespace + "/" + pod.Name
	sels, err := ParseNetworks(pod.Annotations[NetworksAnnotation], pod.Namespace, podKey)
	if err != nil || len(sels) == 0 {
		return nil, err
	}
	var out []*Delegate
	var devs Devices
	used := map[string]int{} // resource -> devices handed out so far
	for _, s := range sels {
		if p.Conf.NamespaceIsolation && s.Namespace != pod.Namespace && !p.Conf.IsGlobal(s.Namespace) {
			return nil, fmt.Errorf("pod %s: network %s refused by namespaceIsolation: a pod may use NADs of its own namespace (%s) and of globalNamespaces (%s) only; fix: create the NAD in %s or add %s to globalNamespaces",
				podKey, s.Key(), pod.Namespace, strings.Join(p.Conf.GlobalNamespaces, ","), pod.Namespace, s.Namespace)
		}
		actx, cancel := context.WithTimeout(ctx, p.Conf.APITimeoutDur)
		nad, err := p.Source.NAD(actx, s.Namespace, s.Name)
		cancel()
		if err != nil {
			if errors.Is(err, ErrNotFound) {
				return nil, fmt.Errorf("pod %s: annotation %s names network %s, but NetworkAttachmentDefinition %s does not exist; fix: create it, or correct the name/namespace in the annotation", podKey, NetworksAnnotation, s.Key(), s.Key())
			}
			return nil, fmt.Errorf("pod %s: %w", podKey, err)
		}
		raw, err := nadConfig(nad, p.Conf.ConfDir)
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", podKey, err)
		}
		l, err := confList(raw, nad.Name, p.Conf.CNIVersion)
		if err != nil {
			return nil, fmt.Errorf("pod %s: NetworkAttachmentDefinition %s: %w", podKey, s.Key(), err)
		}
		d := &Delegate{Network: s.Key(), IfName: s.Interface, CapabilityArgs: map[string]any{}}
		d.DeviceID = s.DeviceID
		if res := nad.Annotations[ResourceNameAnnotation]; res != "" {
			d.Resource = res
			if d.DeviceID == "" {
				if devs == nil {
					if p.Devices == nil {
						return nil, fmt.Errorf("pod %s: NetworkAttachmentDefinition %s needs a device of %s but no PodResources client is configured", podKey, s.Key(), res)
					}
					actx, cancel := context.WithTimeout(ctx, p.Conf.APITimeoutDur)
					devs, err = p.Devices.PodDevices(actx, pod.Namespace, pod.Name)
					cancel()
					if err != nil {
						return nil, fmt.Errorf("pod %s: %w", podKey, err)
					}
				}
				ids := devs[res]
				if used[res] >= len(ids) {
					return nil, fmt.Errorf("pod %s: NetworkAttachmentDefinition %s needs a device of resource %q (its %s annotation), but kubelet allocated the pod %d such device(s) for %d attachment(s); the pod requests: %s. The resource name must match in three places: the device plugin pool, the NAD annotation and the pod's resources; fix: request %s in the pod's resources (limits and requests), one per attachment",
						podKey, s.Key(), res, ResourceNameAnnotation, len(ids), used[res]+1, requestedExtended(pod), res)
				}
				d.DeviceID = ids[used[res]]
				used[res]++
			}
		}
		if d.DeviceID != "" {
			d.CapabilityArgs["deviceID"] = d.DeviceID
		}
		if s.MAC != "" {
			d.CapabilityArgs["mac"] = s.MAC
		}
		if len(s.IPs) > 0 {
			d.CapabilityArgs["ips"] = s.IPs
		}
		if s.InfinibandGUID != "" {
			d.CapabilityArgs["infinibandGUID"] = s.InfinibandGUID
		}
		if len(s.PortMappings) > 0 {
			d.CapabilityArgs["portMappings"] = s.PortMappings
		}
		if s.Bandwidth != nil {
			d.CapabilityArgs["bandwidth"] = s.Bandwidth
		}
		if s.MAC != "" {
			d.CNIArgs = append(d.CNIArgs, [2]string{"MAC", s.MAC})
		}
		for _, gw := range s.DefaultRoute {
			d.DefaultRoute = append(d.DefaultRoute, gw.String())
		}
		conf, err := injectChain(l, d.DeviceID, s.CNIArgs)
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", podKey, err)
		}
		d.Conf = conf
		out = append(out, d)
	}
	return out, nil
}

func (p *Plugin) statuses(rec *Record, results []types.Result) ([]nadv1.NetworkStatus, error) {
	var out []nadv1.NetworkStatus
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
			out = append(out, *s)
		}
	}
	return out, nil
}

// Del removes every delegate of the container, from the cache when
// present, else from libcni's own attachment cache. It never blocks pod
// deletion beyond DelTimeout: what is left is logged as a leak report and
// DEL succeeds.
func (p *Plugin) Del(ctx context.Context, a Args) error {
	ctx, cancel := context.WithTimeout(ctx, p.Conf.DelTimeoutDur)
	defer cancel()
	if p.AsyncStatus != nil {
		p.AsyncStatus.Cancel(a.ContainerID)
	}
	rec, err := p.loadRecord(a.ContainerID)
	var dels []*Delegate
	switch {
	case err == nil:
		dels = rec.Delegates
		if a.Netns == "" {
			a.Netns = rec.Netns
		}
	case errors.Is(err, os.ErrNotExist):
		dels = p.delegatesFromLibcniCache(a)
	default:
		p.Log.Warn("cache unreadable; falling back to libcni's attachment cache", "container", a.ContainerID, "err", err)
		dels = p.delegatesFromLibcniCache(a)
	}
	var leaks []string
	for i := len(dels) - 1; i >= 0; i-- {
		d := dels[i]
		if ctx.Err() != nil {
			leaks = append(leaks, fmt.Sprintf("%s (%s): not attempted, DEL time limit %s reached", d.Network, d.IfName, p.Conf.DelTimeoutDur))
			continue
		}
		if err := p.delDelegate(ctx, a, d); err != nil {
			leaks = append(leaks, fmt.Sprintf("%s (%s): %v", d.Network, d.IfName, err))
		}
	}
	if len(leaks) > 0 {
		if ctx.Err() == nil && p.Conf.RetryDeleteOnError {
			return fmt.Errorf("DEL container %s: %s", a.ContainerID, strings.Join(leaks, "; "))
		}
		p.Log.Error("DEL finished with leaks; reporting success so the pod can be deleted", "container", a.ContainerID, "leaks", leaks)
	}
	if err := os.Remove(p.cachePath(a.ContainerID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		p.Log.Warn("cannot remove cache", "container", a.ContainerID, "err", err)
	}
	return nil
}

// delegatesFromLibcniCache recovers the delegates of a container from
// libcni's cache (written by AddNetworkList) when our own cache is gone.
func (p *Plugin) delegatesFromLibcniCache(a Args) []*Delegate {
	atts, err := p.CNI.GetCachedAttachments(a.ContainerID)
	if err != nil {
		p.Log.Warn("no cache for container; nothing to delete", "container", a.ContainerID, "err", err)
		return nil
	}
	// default network (the DEL's own ifname) first, others by interface name
	sort.SliceStable(atts, func(i, j int) bool {
		if (atts[i].IfName == a.IfName) != (atts[j].IfName == a.IfName) {
			return atts[i].IfName == a.IfName
		}
		return atts[i].IfName < atts[j].IfName
	})
	var out []*Delegate
	for _, at := range atts {
		out = append(out, &Delegate{Network: at.Network, IfName: at.IfName, Conf: at.Config, CapabilityArgs: at.CapabilityArgs, IsDefault: at.IfName == a.IfName})
	}
	return out
}

// Check passes CHECK to every delegate with its cached result.
func (p *Plugin) Check(ctx context.Context, a Args) error {
	rec, err := p.loadRecord(a.ContainerID)
	if err != nil {
		return fmt.Errorf("CHECK container %s: no cache from ADD: %w", a.ContainerID, err)
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
		err := ns.WithNetNSPath(a.Netns, func(ns.NetNS) error { return netops.SetDefaultRoute(d.IfName, gws) })
		if err != nil {
			return fmt.Errorf("ADD %s: default-route %v on %s (%s): %w", podOrContainer(rec), d.DefaultRoute, d.IfName, d.Network, err)
		}
		p.Log.Info("default route moved", "container", a.ContainerID, "ifname", d.IfName, "gateways", d.DefaultRoute)
	}
	return nil
}
