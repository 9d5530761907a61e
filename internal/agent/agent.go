// Package agent is the node agent's engine: it discovers the node's RDMA
// hardware, builds the configured pools, serves each advertised pool over
// the Device Plugin API, keeps device health and membership current, picks
// up configuration changes, and re-registers when kubelet restarts. Nothing
// here needs a restart of the agent.
package agent

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/rdmanet/rdmanet/internal/deviceplugin"
	"github.com/rdmanet/rdmanet/internal/deviceplugin/config"
	"github.com/rdmanet/rdmanet/internal/inventory"
	"github.com/rdmanet/rdmanet/internal/telemetry"
)

// HostProbe reads what only the kernel knows (through netlink): which links
// carry the default route and the RDMA subsystem's netns mode.
type HostProbe interface {
	DefaultRouteLinks() ([]string, error)
	// RDMANetnsMode returns "exclusive" or "shared"; an error when the
	// kernel cannot tell (no RDMA subsystem).
	RDMANetnsMode() (string, error)
}

// Options configure the agent. Every host path is a parameter.
type Options struct {
	SysfsRoot     string
	ConfigPaths   []string
	PluginDir     string // kubelet device-plugin dir
	KubeletSocket string // default <PluginDir>/kubelet.sock
	DevInfoDir    string
	NetnsModeFlag string // operator's statement of the RDMA netns mode
	Probe         HostProbe
	Resync        time.Duration // health refresh and socket check interval
	// FullRescan is how often the whole node is rediscovered (new PCI
	// functions); VF count changes and RDMA devices appearing or vanishing
	// are caught by the health refresh and trigger a rediscovery at once.
	FullRescan time.Duration
	Logger     *slog.Logger
	// Observer, when set, learns of registrations and kubelet restarts
	// (the agent's metrics).
	Observer Observer
	// Snapshots, when set, is called after every discovery and after
	// every health refresh that changed a device's health (the DRA
	// publisher, --dra). It runs under the agent's lock: it must not block,
	// and must not keep snap, whose pools change in place.
	Snapshots func(snap *Snapshot)
	// Guard, when set, is handed to every pool server: devices another
	// allocator (the DRA kubelet plugin, --dra) holds are listed Unhealthy
	// and refused by Allocate (deviceplugin.Guard).
	Guard deviceplugin.Guard
	// NoDevicePlugin: serve no pool to kubelet's device manager (no
	// socket, no registration); the pools are still discovered, checked
	// and handed to Snapshots, for DRA only (--device-plugin=false). A
	// pool server already running is stopped: kubelet then reports the
	// pool's resource with 0 allocatable, which makes kube-scheduler serve
	// its requests through a DeviceClass with that extendedResourceName.
	NoDevicePlugin bool
}

// Observer learns what the agent does with kubelet; it must not block.
type Observer interface {
	// Registered is one registration of a pool with kubelet (err nil: accepted).
	Registered(resource string, err error)
	// KubeletRestarted: kubelet's registration socket was recreated, and
	// every pool registers again.
	KubeletRestarted()
}

func (o *Options) defaults() {
	if o.KubeletSocket == "" {
		o.KubeletSocket = filepath.Join(o.PluginDir, "kubelet.sock")
	}
	if o.Resync <= 0 {
		o.Resync = 500 * time.Millisecond
	}
	if o.FullRescan <= 0 {
		o.FullRescan = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Snapshot is one discovery + pool build.
type Snapshot struct {
	Node  *inventory.Node
	Pools []*deviceplugin.Pool
}

// Discover runs one discovery with the given pool specs.
func Discover(o Options, specs []config.Pool) (*Snapshot, error) {
	io := inventory.Options{SysfsRoot: o.SysfsRoot, NetnsModeFlag: o.NetnsModeFlag}
	if o.Probe != nil {
		links, err := o.Probe.DefaultRouteLinks()
		if err != nil {
			return nil, fmt.Errorf("read default route: %w", err)
		}
		io.DefaultRouteLinks = links
		io.NetnsMode, io.NetnsModeErr = o.Probe.RDMANetnsMode()
		if io.NetnsModeErr != nil {
			io.NetnsMode = ""
		}
	}
	node, err := inventory.Discover(io)
	if err != nil {
		return nil, err
	}
	pools, err := deviceplugin.Build(node, specs)
	if err != nil {
		return nil, err
	}
	return &Snapshot{Node: node, Pools: pools}, nil
}

// Agent serves the pools.
type Agent struct {
	o   Options
	log *slog.Logger

	mu          sync.Mutex
	specs       []config.Pool
	skipped     []SkippedPool
	servers     map[string]*deviceplugin.Server
	registered  map[string]bool
	kubeletIno  uint64
	kubeletSeen bool // a kubelet socket was there before: a new one is a restart
	last        *Snapshot
	configError error
	reconciles  int
	lastFull    time.Time
	beat        telemetry.Heartbeat // the Run loop went round
}

// New validates the configuration once (a bad file at start is fatal).
func New(o Options) (*Agent, error) {
	o.defaults()
	cfg, err := LoadConfigFiles(o.ConfigPaths)
	if err != nil {
		return nil, err
	}
	cfg.Log(o.Logger)
	return &Agent{o: o, log: o.Logger, specs: cfg.Pools, skipped: cfg.Skipped, servers: map[string]*deviceplugin.Server{}, registered: map[string]bool{}}, nil
}

// Skipped returns the pools of the current configuration that rdmanet
// does not serve.
func (a *Agent) Skipped() []SkippedPool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]SkippedPool(nil), a.skipped...)
}

// Last returns the most recent snapshot.
func (a *Agent) Last() *Snapshot {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last
}

// Server returns the server of a resource, or nil.
func (a *Agent) Server(resource string) *deviceplugin.Server {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.servers[resource]
}

// Run serves until ctx ends, then stops every server and removes its socket.
func (a *Agent) Run(ctx context.Context) error {
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch config files: %w", err)
	}
	defer watcher.Close()
	// Watch directories: ConfigMap volumes swap a ..data symlink, which
	// only shows up as events on the directory.
	dirs := map[string]bool{}
	for _, p := range a.o.ConfigPaths {
		dirs[filepath.Dir(p)] = true
	}
	for d := range dirs {
		if err := watcher.Add(d); err != nil {
			a.log.Warn("cannot watch config dir; changes are picked up on the periodic rescan only", "dir", d, "err", err)
		}
	}
	defer a.stopAll()
	a.beat.Beat()
	a.reconcile(ctx, true)
	tick := time.NewTicker(a.o.Resync)
	defer tick.Stop()
	for {
		a.beat.Beat()
		select {
		case <-ctx.Done():
			return nil
		case ev := <-watcher.Events:
			if a.isConfigEvent(ev) {
				a.reconcile(ctx, true)
			}
		case err := <-watcher.Errors:
			a.log.Warn("config watch error", "err", err)
		case <-tick.C:
			a.refresh(ctx)
		}
	}
}

func (a *Agent) isConfigEvent(ev fsnotify.Event) bool {
	for _, p := range a.o.ConfigPaths {
		if filepath.Clean(ev.Name) == filepath.Clean(p) || filepath.Base(ev.Name) == "..data" {
			return true
		}
	}
	return false
}

// reconcile rescans the node, rebuilds the pools, starts/stops/updates
// servers, and re-registers with kubelet when needed.
func (a *Agent) reconcile(ctx context.Context, reloadConfig bool) {
	a.register(ctx, a.reconcileLocked(reloadConfig))
}

// reconcileLocked does reconcile's work under a.mu and returns the servers
// that still need registering with kubelet.
func (a *Agent) reconcileLocked(reloadConfig bool) []*deviceplugin.Server {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reconciles++
	if reloadConfig && a.reconciles > 1 {
		cfg, err := LoadConfigFiles(a.o.ConfigPaths)
		switch {
		case err != nil:
			if a.configError == nil || a.configError.Error() != err.Error() {
				a.log.Error("new pool configuration rejected; keeping the previous one", "err", err)
			}
			a.configError = err
		default:
			if a.configError != nil {
				a.log.Info("pool configuration is valid again")
			}
			a.configError = nil
			a.specs, a.skipped = cfg.Pools, cfg.Skipped
			cfg.Log(a.log)
			a.log.Info("pool configuration reloaded", "pools", len(cfg.Pools), "skipped", len(cfg.Skipped), "warnings", len(cfg.Warnings))
		}
	}
	a.lastFull = time.Now()
	snap, err := Discover(a.o, a.specs)
	if err != nil {
		// An overlap or an unreadable bus: keep serving what we had.
		a.log.Error("discovery failed; keeping the previous pools", "err", err)
		return nil
	}
	a.logChanges(snap)
	a.last = snap
	if a.o.Snapshots != nil {
		a.o.Snapshots(snap)
	}
	return a.serve(snap)
}

// refresh is the cheap periodic pass: re-read health inputs of the known
// devices and push changes; rediscover when the node's structure changed
// or the full-rescan interval has passed.
func (a *Agent) refresh(ctx context.Context) {
	a.mu.Lock()
	if a.last == nil || time.Since(a.lastFull) >= a.o.FullRescan || a.last.Node.RefreshHealth(a.o.SysfsRoot) {
		a.mu.Unlock()
		a.reconcile(ctx, false)
		return
	}
	changes := deviceplugin.Rehealth(a.last.Node, a.last.Pools)
	for _, c := range changes {
		a.log.Info("device health changed", "resource", c.Resource, "device", c.Device, "health", c.Health, "reason", c.Reason)
	}
	if len(changes) > 0 && a.o.Snapshots != nil {
		a.o.Snapshots(a.last)
	}
	pending := a.serve(a.last)
	a.mu.Unlock()
	a.register(ctx, pending)
}

// serve starts, updates and restarts the pool servers for snap and returns
// those that need registering with kubelet. The caller holds a.mu.
func (a *Agent) serve(snap *Snapshot) []*deviceplugin.Server {
	var pending []*deviceplugin.Server
	want := map[string]*deviceplugin.Pool{}
	for _, p := range snap.Pools {
		if p.Advertised && !a.o.NoDevicePlugin {
			want[p.Resource] = p
		}
	}
	for res, srv := range a.servers {
		if _, ok := want[res]; !ok {
			a.log.Info("pool no longer advertised; stopping its server", "resource", res)
			srv.Stop()
			delete(a.servers, res)
			delete(a.registered, res)
		}
	}
	kubeletChanged := a.kubeletRestarted()
	for _, res := range slices.Sorted(maps.Keys(want)) {
		p := want[res]
		srv := a.servers[res]
		if srv == nil {
			srv = deviceplugin.NewServer(p, deviceplugin.ServerOptions{PluginDir: a.o.PluginDir, DevInfoDir: a.o.DevInfoDir, RDMACM: snap.Node.RDMACM, Logger: a.log, Guard: a.o.Guard})
			if err := srv.Start(); err != nil {
				a.log.Error("cannot serve pool", "resource", res, "err", err)
				continue
			}
			a.servers[res] = srv
			a.registered[res] = false
			a.log.Info("serving pool", "pool", p.Summary(), "socket", srv.Socket())
		} else if srv.Update(p) {
			a.log.Info("pool devices changed", "pool", p.Summary())
		}
		// kubelet deletes every socket in its dir when it starts: serve again.
		if _, err := os.Stat(srv.Socket()); err != nil {
			a.log.Warn("our socket disappeared (kubelet restarted?); serving again", "socket", srv.Socket())
			srv.Stop()
			srv = deviceplugin.NewServer(p, deviceplugin.ServerOptions{PluginDir: a.o.PluginDir, DevInfoDir: a.o.DevInfoDir, RDMACM: snap.Node.RDMACM, Logger: a.log, Guard: a.o.Guard})
			if err := srv.Start(); err != nil {
				a.log.Error("cannot serve pool", "resource", res, "err", err)
				continue
			}
			a.servers[res] = srv
			a.registered[res] = false
		}
		if kubeletChanged {
			a.registered[res] = false
		}
		if !a.registered[res] && a.kubeletIno != 0 {
			pending = append(pending, srv)
		}
	}
	return pending
}

// register registers servers with kubelet without holding a.mu (a slow or
// hung kubelet must not stall Last(), health or the reports), then marks
// those that are still the pool's current server. Only the Run loop calls
// reconcile and refresh, so registrations never overlap.
func (a *Agent) register(ctx context.Context, servers []*deviceplugin.Server) {
	for _, srv := range servers {
		res := srv.Resource()
		err := srv.Register(ctx, a.o.KubeletSocket)
		if a.o.Observer != nil {
			a.o.Observer.Registered(res, err)
		}
		if err != nil {
			a.log.Warn("registration failed; retrying on the next rescan", "resource", res, "err", err)
			continue
		}
		a.mu.Lock()
		if a.servers[res] == srv {
			a.registered[res] = true
		}
		a.mu.Unlock()
		a.log.Info("registered with kubelet", "resource", res, "kubelet", a.o.KubeletSocket)
	}
}

// kubeletRestarted reports whether kubelet.sock was (re)created since the last look.
func (a *Agent) kubeletRestarted() bool {
	var ino uint64
	if fi, err := os.Stat(a.o.KubeletSocket); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			ino = st.Ino
		}
	}
	changed := ino != a.kubeletIno
	if changed && ino != 0 && a.kubeletSeen {
		a.log.Info("kubelet socket recreated (kubelet restarted); re-registering every pool")
		if a.o.Observer != nil {
			a.o.Observer.KubeletRestarted()
		}
	}
	a.kubeletIno = ino
	a.kubeletSeen = a.kubeletSeen || ino != 0
	return changed
}

func (a *Agent) logChanges(snap *Snapshot) {
	prev := map[string]string{}
	if a.last != nil {
		for _, p := range a.last.Pools {
			prev[p.Resource] = problemKey(p)
		}
	}
	for _, p := range snap.Pools {
		if k := problemKey(p); k != prev[p.Resource] && len(p.Problems) > 0 {
			for _, pr := range p.Problems {
				a.log.Warn("pool problem", "resource", p.Resource, "problem", pr)
			}
		}
		if a.last == nil {
			continue
		}
		old := a.pool(a.last, p.Resource)
		if old == nil {
			continue
		}
		oldH := map[string]string{}
		for _, d := range old.Devices {
			oldH[d.ID] = d.Health
		}
		for _, d := range p.Devices {
			if h, ok := oldH[d.ID]; ok && h != d.Health {
				a.log.Info("device health changed", "resource", p.Resource, "device", d.ID, "health", d.Health, "reason", d.Reason)
			} else if !ok {
				a.log.Info("device appeared", "resource", p.Resource, "device", d.ID)
			}
			delete(oldH, d.ID)
		}
		for id := range oldH {
			a.log.Info("device vanished", "resource", p.Resource, "device", id)
		}
	}
}

func (a *Agent) pool(s *Snapshot, res string) *deviceplugin.Pool {
	for _, p := range s.Pools {
		if p.Resource == res {
			return p
		}
	}
	return nil
}

func problemKey(p *deviceplugin.Pool) string {
	return fmt.Sprint(p.Problems)
}

func (a *Agent) stopAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for res, srv := range a.servers {
		srv.Stop()
		delete(a.servers, res)
	}
}
