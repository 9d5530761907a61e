// Package inproc runs rdmanet's own CNI plugins (sriov, rdma, rdmanet-ipam,
// also installed as whereabouts) inside the calling process instead of
// exec'ing them, for the daemon: a Go plugin process start costs 15-30 ms.
//
// Exec is a libcni invoke.Exec. A plugin runs in-process only when its file
// is provably the same rdmanet build as the running process (see Identity);
// anything else — an upstream plugin installed under the same name, another
// rdmanet release, an unstamped build, a file whose build info cannot be
// read — runs as a process through invoke.RawExec, as libcni would.
package inproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/ns"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/utils"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/rdmanet/rdmanet/internal/cni/rdma"
	"github.com/rdmanet/rdmanet/internal/cni/sriov"
	"github.com/rdmanet/rdmanet/internal/daemon/inproc/nsguard"
	"github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/internal/netops"
)

// Module is the main module path every in-process plugin must be built from.
const Module = "github.com/rdmanet/rdmanet"

// Package paths of the plugin binaries.
const (
	PkgSRIOV = Module + "/cmd/sriov"
	PkgRDMA  = Module + "/cmd/rdma"
	PkgIPAM  = Module + "/cmd/rdmanet-ipam"
)

// RunFunc runs one verb of a plugin whose CNI_* environment skel's checks
// have passed; it returns what the binary prints on stdout. environ is the
// call's whole environment, e is the Exec to delegate through.
type RunFunc func(ctx context.Context, e *Exec, cmd string, args *skel.CmdArgs, environ []string) ([]byte, error)

// Plugin is one plugin the Exec may run in-process.
type Plugin struct {
	// Package is the main package its binary must be built from.
	Package  string
	Versions version.PluginInfo
	// Fault is its name in RDMANET_CNI_FAULT: an ":exit" failpoint for it
	// kills its process, so such a call runs as a process.
	Fault string
	Run   RunFunc
}

// Default maps binary names to rdmanet's plugins.
func Default() map[string]Plugin {
	ipamP := Plugin{Package: PkgIPAM, Versions: version.All, Run: func(ctx context.Context, e *Exec, cmd string, a *skel.CmdArgs, env []string) ([]byte, error) {
		return ipam.RunWith(ctx, cmd, a, Getenv(env), &e.Stores)
	}}
	return map[string]Plugin{
		"sriov": {Package: PkgSRIOV, Versions: sriov.Versions, Fault: "sriov", Run: func(ctx context.Context, e *Exec, cmd string, a *skel.CmdArgs, env []string) ([]byte, error) {
			return sriov.Run(cmd, a, Getenv(env), &delegateIPAM{ctx: ctx, exec: e, environ: env})
		}},
		"rdma": {Package: PkgRDMA, Versions: rdma.Versions, Fault: "rdma", Run: func(_ context.Context, _ *Exec, cmd string, a *skel.CmdArgs, env []string) ([]byte, error) {
			return rdma.Run(cmd, a, Getenv(env))
		}},
		"rdmanet-ipam": ipamP,
		"whereabouts":  ipamP, // only when the file is rdmanet-ipam (Package decides)
	}
}

// Exec implements invoke.Exec, running registered plugins of this very
// build in-process and everything else as a process.
type Exec struct {
	// Raw runs plugins as processes (default: stderr to os.Stderr, as libcni).
	Raw *invoke.RawExec
	// Plugins are the in-process plugins by binary name (default: Default()).
	Plugins map[string]Plugin
	// Self is the build the plugin files must match (default: this
	// process's debug.ReadBuildInfo).
	Self *debug.BuildInfo
	Log  *slog.Logger
	// Stores keeps rdmanet-ipam's API clients across calls.
	Stores ipam.StoreCache
	// Observer, when set, learns of every plugin call ExecPlugin runs
	// (the daemon's metrics).
	Observer Observer
	version.PluginDecoder

	once    sync.Once
	self    identity
	selfErr error
	mu      sync.Mutex
	cache   map[string]decision
	builds  map[string]string // Serve: build info text + package -> mismatch ("" = own build)
}

var _ invoke.Exec = (*Exec)(nil)

// Observer learns of plugin calls; it must not block.
type Observer interface {
	// PluginExec is one call of a plugin binary (its file name): command is
	// CNI_COMMAND, mode ModeInProcess or ModeProcess, err the call's error.
	PluginExec(plugin, command, mode string, d time.Duration, err error)
}

// Modes of a plugin call, for Observer.
const (
	ModeInProcess = "in_process"
	ModeProcess   = "process"
)

// New returns an Exec for the running process.
func New(log *slog.Logger) *Exec { return &Exec{Log: log} }

type decision struct {
	size   int64
	mtime  time.Time
	inproc bool
	reason string
	plugin Plugin
}

func (e *Exec) raw() *invoke.RawExec {
	if e.Raw == nil {
		return &invoke.RawExec{Stderr: os.Stderr}
	}
	return e.Raw
}

func (e *Exec) log() *slog.Logger {
	if e.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return e.Log
}

// FindInPath is invoke.FindInPath.
func (e *Exec) FindInPath(plugin string, paths []string) (string, error) {
	return invoke.FindInPath(plugin, paths)
}

// Decide reports whether the plugin file at path runs in-process, and why.
func (e *Exec) Decide(path string) (bool, string) {
	d := e.decide(path)
	return d.inproc, d.reason
}

// plugins are the in-process plugins by binary name.
func (e *Exec) plugins() map[string]Plugin {
	if e.Plugins == nil {
		return defaultPlugins()
	}
	return e.Plugins
}

// exitFailpoint: the call's environment sets an ":exit" failpoint for p
// (test builds), which kills its process; that must not be the daemon.
func exitFailpoint(p Plugin, environ []string) bool {
	if p.Fault == "" {
		return false
	}
	fp := netops.FailpointFromEnv(Getenv(environ), p.Fault)
	return fp != nil && fp.Exit
}

func (e *Exec) decide(path string) decision {
	name := filepath.Base(path)
	p, ok := e.plugins()[name]
	if !ok {
		return decision{reason: "not an rdmanet plugin name"}
	}
	st, err := os.Stat(path)
	if err != nil {
		return decision{reason: "stat: " + err.Error()}
	}
	e.mu.Lock()
	if d, ok := e.cache[path]; ok && d.size == st.Size() && d.mtime.Equal(st.ModTime()) {
		e.mu.Unlock()
		return d
	}
	e.mu.Unlock()
	d := decision{size: st.Size(), mtime: st.ModTime(), plugin: p}
	e.once.Do(func() { e.self, e.selfErr = selfIdentity(e.Self) })
	if e.selfErr != nil {
		d.reason = e.selfErr.Error()
	} else if id, err := readIdentity(path); err != nil {
		d.reason = err.Error()
	} else if why := e.self.mismatch(id, p.Package); why != "" {
		d.reason = why
	} else {
		d.inproc = true
		d.reason = "same rdmanet build (" + e.self.stamp() + ")"
	}
	e.mu.Lock()
	if e.cache == nil {
		e.cache = map[string]decision{}
	}
	e.cache[path] = d
	e.mu.Unlock()
	mode := "process"
	if d.inproc {
		mode = "in-process"
	}
	e.log().Debug("CNI plugin mode", "plugin", path, "mode", mode, "reason", d.reason)
	return d
}

// ExecPlugin runs the plugin in-process when Decide says so, else as a
// process through RawExec.
func (e *Exec) ExecPlugin(ctx context.Context, pluginPath string, stdin []byte, environ []string) (out []byte, err error) {
	start := time.Now()
	d := e.decide(pluginPath)
	mode := ModeProcess
	if d.inproc && !exitFailpoint(d.plugin, environ) {
		mode = ModeInProcess
		out, err = e.run(ctx, pluginPath, d.plugin, stdin, environ)
	} else {
		out, err = e.raw().ExecPlugin(ctx, pluginPath, stdin, environ)
	}
	if e.Observer != nil {
		e.Observer.PluginExec(filepath.Base(pluginPath), Getenv(environ)("CNI_COMMAND"), mode, time.Since(start), err)
	}
	return out, err
}

// Serve runs one call that an exec'd plugin binary forwarded (package
// forward) in-process, when the binary is this very build of that plugin:
// build is its Go build info (debug.BuildInfo.String()). Otherwise it does
// nothing and returns why (declined), and the binary runs the call itself.
// out and err are what the binary would have printed and exited with.
func (e *Exec) Serve(ctx context.Context, plugin, build string, stdin []byte, environ []string) (out []byte, declined string, err error) {
	p, ok := e.plugins()[plugin]
	if !ok {
		return nil, fmt.Sprintf("%q is not a plugin this daemon runs", plugin), nil
	}
	e.once.Do(func() { e.self, e.selfErr = selfIdentity(e.Self) })
	if e.selfErr != nil {
		return nil, e.selfErr.Error(), nil
	}
	if why := e.buildMismatch(build, p.Package); why != "" {
		return nil, why, nil
	}
	if exitFailpoint(p, environ) {
		return nil, "an :exit failpoint must kill the plugin's own process", nil
	}
	out, err = e.run(ctx, plugin, p, stdin, environ)
	return out, "", err
}

// buildMismatch says why the build info text is not this process's build
// of pkg ("" when it is), remembered per text: every call of one plugin
// binary sends the same.
func (e *Exec) buildMismatch(build, pkg string) string {
	key := pkg + "\x00" + build
	e.mu.Lock()
	why, ok := e.builds[key]
	e.mu.Unlock()
	if ok {
		return why
	}
	bi, err := debug.ParseBuildInfo(build)
	if err != nil {
		why = "the plugin's build info does not parse: " + err.Error()
	} else {
		if first, _, _ := strings.Cut(build, "\n"); bi.GoVersion == "" && strings.HasPrefix(first, "go\t") {
			bi.GoVersion = strings.TrimPrefix(first, "go\t") // String writes it, ParseBuildInfo does not read it
		}
		if m := e.self.mismatch(newIdentity(bi), pkg); m != "" {
			why = "the plugin binary is not this daemon's build: " + m
		}
	}
	e.mu.Lock()
	if e.builds == nil || len(e.builds) >= 64 { // a few plugin builds per node; bound it anyway
		e.builds = map[string]string{}
	}
	e.builds[key] = why
	e.mu.Unlock()
	return why
}

// run is skel's dispatcher over the call's environment, with the plugin's
// output and error shaped as RawExec returns them for a process.
func (e *Exec) run(ctx context.Context, path string, p Plugin, stdin []byte, environ []string) (out []byte, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	name := filepath.Base(path)
	defer func() {
		if r := recover(); r != nil {
			value, stack := r, debug.Stack()
			if np, ok := r.(*nsguard.Panic); ok { // raised in a netns callback: its own stack
				value, stack = np.Value, np.Stack
			}
			e.log().Error("in-process CNI plugin panicked", "plugin", path, "panic", fmt.Sprint(value), "stack", string(stack))
			out, err = nil, &types.Error{Code: types.ErrInternal, Msg: fmt.Sprintf("CNI plugin %s (in-process) panicked: %v", name, value)}
		}
	}()
	var buf bytes.Buffer
	if terr := dispatch(ctx, e, p, Getenv(environ), stdin, environ, &buf); terr != nil {
		// what RawExec makes of the JSON a failing process prints
		return nil, &types.Error{Code: terr.Code, Msg: terr.Msg, Details: terr.Details}
	}
	return buf.Bytes(), nil
}

// Getenv looks keys up in environ, the later of duplicates winning (as
// exec does).
func Getenv(environ []string) func(string) string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return func(k string) string { return m[k] }
}

// WithCommand is environ with CNI_COMMAND set to cmd.
func WithCommand(environ []string, cmd string) []string {
	out := make([]string, 0, len(environ)+1)
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "CNI_COMMAND=") {
			out = append(out, kv)
		}
	}
	return append(out, "CNI_COMMAND="+cmd)
}

// required are the CNI_* variables each verb needs (CNI spec, "Parameters").
var required = map[string][]string{
	"ADD":    {"CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_PATH"},
	"CHECK":  {"CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_PATH"},
	"DEL":    {"CNI_CONTAINERID", "CNI_IFNAME", "CNI_PATH"},
	"GC":     {"CNI_PATH"},
	"STATUS": {"CNI_PATH"},
}

// minConfigVersion is the oldest config version each verb exists in.
var minConfigVersion = map[string]string{"CHECK": "0.4.0", "GC": "1.1.0", "STATUS": "1.1.0"}

// dispatch runs one CNI call of p over the call's environment and config.
// The caller is libcni in this process, so the environment is normally
// well-formed; the checks a plugin binary makes are made here too, with the
// same CNI error codes, so a bad call fails the same way in both modes.
func dispatch(ctx context.Context, e *Exec, p Plugin, getenv func(string) string, stdin []byte, environ []string, stdout io.Writer) *types.Error {
	cmd := getenv("CNI_COMMAND")
	if cmd == "VERSION" {
		if err := p.Versions.Encode(stdout); err != nil {
			return types.NewError(types.ErrIOFailure, err.Error(), "")
		}
		return nil
	}
	need, known := required[cmd]
	if !known {
		return types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("CNI_COMMAND %q is not one of ADD, DEL, CHECK, GC, STATUS, VERSION", cmd), "")
	}
	var missing []string
	for _, k := range need {
		if getenv(k) == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("CNI_COMMAND %s needs %s set", cmd, strings.Join(missing, ", ")), "")
	}
	args := &skel.CmdArgs{ContainerID: getenv("CNI_CONTAINERID"), Netns: getenv("CNI_NETNS"), IfName: getenv("CNI_IFNAME"),
		Args: getenv("CNI_ARGS"), Path: getenv("CNI_PATH"), NetnsOverride: getenv("CNI_NETNS_OVERRIDE"), StdinData: stdin}
	if args.ContainerID != "" {
		if err := utils.ValidateContainerID(args.ContainerID); err != nil {
			return err
		}
	}
	if args.IfName != "" {
		if err := utils.ValidateInterfaceName(args.IfName); err != nil {
			return err
		}
	}
	var conf struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(stdin, &conf); err != nil {
		return types.NewError(types.ErrDecodingFailure, "network config is not JSON: "+err.Error(), "")
	}
	if conf.Name == "" {
		return types.NewError(types.ErrInvalidNetworkConfig, "network config has no name", "")
	}
	if err := utils.ValidateNetworkName(conf.Name); err != nil {
		return err
	}
	confVersion, err := (&version.ConfigDecoder{}).Decode(stdin)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, err.Error(), "")
	}
	if min, ok := minConfigVersion[cmd]; ok {
		if ok, err := version.GreaterThanOrEqualTo(confVersion, min); err != nil {
			return types.NewError(types.ErrDecodingFailure, err.Error(), "")
		} else if !ok {
			return types.NewError(types.ErrIncompatibleCNIVersion, fmt.Sprintf("%s needs config version %s or later, the config has %s", cmd, min, confVersion), "")
		}
	}
	if verr := (&version.Reconciler{}).Check(confVersion, p.Versions); verr != nil {
		return types.NewError(types.ErrIncompatibleCNIVersion, "incompatible CNI versions", verr.Details())
	}
	if cmd == "GC" || cmd == "STATUS" {
		return nil // rdmanet's plugins keep no state GC could collect and are always ready
	}
	if cmd != "DEL" && args.NetnsOverride != "1" && !strings.EqualFold(args.NetnsOverride, "true") {
		// the pod's netns must not be the one the plugin runs in (here: the daemon's)
		same, err := ns.CheckNetNS(args.Netns)
		if err != nil {
			return err
		}
		if same {
			return types.NewError(types.ErrInvalidNetNS, "CNI_NETNS "+args.Netns+" is the network namespace the plugin runs in, not a pod's", "")
		}
	}
	out, err := p.Run(ctx, e, cmd, args, environ)
	if err != nil {
		var te *types.Error
		if errors.As(err, &te) {
			return te
		}
		return types.NewError(types.ErrInternal, err.Error(), "")
	}
	_, _ = stdout.Write(out)
	return nil
}

var defaultPlugins = sync.OnceValue(Default)

// delegateIPAM is sriov's IPAM for an in-process sriov: it finds the IPAM
// plugin on the call's CNI_PATH and runs it through the same Exec (so
// rdmanet-ipam of this build runs in-process too) with the call's
// environment and CNI_COMMAND set, as ipam.ExecAdd in the binary would.
type delegateIPAM struct {
	ctx     context.Context
	exec    *Exec
	environ []string
}

func (d *delegateIPAM) find(plugin string) (string, error) {
	return d.exec.FindInPath(plugin, filepath.SplitList(Getenv(d.environ)("CNI_PATH")))
}

type envArgs []string

func (a envArgs) AsEnv() []string { return a }

func (d *delegateIPAM) Add(plugin string, stdin []byte) (types.Result, error) {
	path, err := d.find(plugin)
	if err != nil {
		return nil, err
	}
	return invoke.ExecPluginWithResult(d.ctx, path, stdin, envArgs(WithCommand(d.environ, "ADD")), d.exec)
}

func (d *delegateIPAM) Check(plugin string, stdin []byte) error {
	return d.noResult(plugin, stdin, "CHECK")
}

func (d *delegateIPAM) Del(plugin string, stdin []byte) error {
	return d.noResult(plugin, stdin, "DEL")
}

func (d *delegateIPAM) DelFor(plugin string, stdin []byte, containerID, ifName string) error {
	path, err := d.find(plugin)
	if err != nil {
		return err
	}
	env := withVars(d.environ, "CNI_COMMAND=DEL", "CNI_CONTAINERID="+containerID, "CNI_IFNAME="+ifName)
	return invoke.ExecPluginWithoutResult(d.ctx, path, stdin, envArgs(env), d.exec)
}

func (d *delegateIPAM) noResult(plugin string, stdin []byte, cmd string) error {
	path, err := d.find(plugin)
	if err != nil {
		return err
	}
	return invoke.ExecPluginWithoutResult(d.ctx, path, stdin, envArgs(WithCommand(d.environ, cmd)), d.exec)
}

// withVars is environ with each KEY=value of vars set (replacing KEY).
func withVars(environ []string, vars ...string) []string {
	keys := map[string]bool{}
	for _, kv := range vars {
		k, _, _ := strings.Cut(kv, "=")
		keys[k] = true
	}
	out := make([]string, 0, len(environ)+len(vars))
	for _, kv := range environ {
		if k, _, _ := strings.Cut(kv, "="); !keys[k] {
			out = append(out, kv)
		}
	}
	return append(out, vars...)
}
