package ipam

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	cnitypes "github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
)

// Environment variables read by the plugin (besides the CNI_* ones).
const (
	// EnvNodeName names the node (Whereabouts uses the same variable).
	EnvNodeName = "NODENAME"
	// EnvStorePath overrides the default store path (store.path wins over it).
	EnvStorePath = "RDMANET_IPAM_STORE_PATH"
	// EnvStoreType selects the store when neither the network config nor
	// the node config file does ("local" for tests, the demo, a single node).
	EnvStoreType = "RDMANET_IPAM_STORE_TYPE"
	// EnvNodeConfig overrides the node config file path (configuration_path wins over it).
	EnvNodeConfig = "RDMANET_IPAM_CONFIG"
)

// DefaultTimeout bounds one CNI call, retries included.
const DefaultTimeout = 90 * time.Second

// ErrStoreUnavailable is matched (errors.Is) by every StoreError.
var ErrStoreUnavailable = errors.New("rdmanet-ipam store not usable")

// StoreError says the selected store cannot be used, naming the setting or
// file to fix. The plugin fails closed: it never falls back to another store.
type StoreError struct {
	Network string
	// Problem names the store, the setting that selected it and what is wrong.
	Problem string
	Fix     string
	Err     error
}

func (e *StoreError) Error() string {
	s := fmt.Sprintf("rdmanet-ipam: network %q: %s", e.Network, e.Problem)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s + "; fix: " + e.Fix
}

// Is makes errors.Is(err, ErrStoreUnavailable) true.
func (e *StoreError) Is(target error) bool { return target == ErrStoreUnavailable }

// Unwrap returns the underlying error.
func (e *StoreError) Unwrap() error { return e.Err }

// Plugin implements the CNI verbs over injected I/O, so tests drive it
// without exec and without touching the host.
type Plugin struct {
	Getenv   func(string) string
	ReadFile func(string) ([]byte, error)
	Hostname func() (string, error)
	// OpenStore returns the store the config selects (see OpenStore).
	OpenStore func(cfg *Config) (Store, error)
	// Stdout receives the CNI result.
	Stdout io.Writer
	// Stderr receives warnings (the runtime keeps a plugin's stderr in its
	// log); they also go to log_file when the config sets one. nil: none.
	Stderr  io.Writer
	Timeout time.Duration
	// Context, when set, is the parent of every call's context (the
	// daemon's request deadline); nil: context.Background().
	Context context.Context
}

// NewPlugin returns a Plugin wired to the process environment.
func NewPlugin() *Plugin {
	return &Plugin{Getenv: os.Getenv, ReadFile: os.ReadFile, Hostname: os.Hostname, OpenStore: OpenStore,
		Stdout: os.Stdout, Stderr: os.Stderr, Timeout: DefaultTimeout}
}

// OpenStore opens the store selected by cfg. It fails closed: the
// kubernetes store without a usable kubeconfig is a *StoreError naming the
// file or setting to fix, never a node-local store.
func OpenStore(cfg *Config) (Store, error) {
	switch cfg.Store.Type {
	case StoreLocal:
		return &LocalStore{Dir: cfg.Store.Path}, nil
	case StoreKubernetes:
	default:
		return nil, &StoreError{Network: cfg.Network, Problem: fmt.Sprintf("unknown store type %q", cfg.Store.Type), Fix: `use "kubernetes" or "local"`}
	}
	if cfg.Store.Kubeconfig == "" {
		return nil, &StoreError{Network: cfg.Network,
			Problem: fmt.Sprintf("the kubernetes store (selected by %s) needs a kubeconfig and none is set", cfg.Store.TypeFrom),
			Fix: fmt.Sprintf(`set "store": {"type": "kubernetes", "kubeconfig": "<file>"} in the node config file %s (the rdmanet-node DaemonSet writes it) or in the ipam config; `+
				`only for a single node, where node-local addresses are safe, choose "store": {"type": "local"} (or %s=local)`, cfg.NodeConfigPath, EnvStoreType)}
	}
	bad := func(err error) error {
		return &StoreError{Network: cfg.Network,
			Problem: fmt.Sprintf("kubernetes store: kubeconfig %s (set by %s) is not usable", cfg.Store.Kubeconfig, cfg.Store.KubeconfigFrom), Err: err,
			Fix: "make that file a readable kubeconfig (on cluster nodes the rdmanet-node DaemonSet writes it), or point the setting at one; rdmanet-ipam never falls back to node-local addresses"}
	}
	rc, err := loadKubeconfig(cfg.Store.Kubeconfig)
	if err != nil {
		return nil, bad(err)
	}
	rc.Timeout = 30 * time.Second
	s, err := NewKubeStore(rc)
	if err != nil {
		return nil, bad(err)
	}
	return s, nil
}

// LoadConfig reads the node config and parses the network config.
func (p *Plugin) LoadConfig(stdin []byte) (*Config, error) {
	path := NodeConfigPath(stdin)
	if path == DefaultNodeConfigPath {
		if v := p.Getenv(EnvNodeConfig); v != "" {
			path = v
		}
	}
	node, err := p.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("rdmanet-ipam: read node config %s: %w", path, err)
	}
	return Parse(stdin, Env{NodeConfig: node, NodeConfigPath: path, StorePath: p.Getenv(EnvStorePath), StoreType: p.Getenv(EnvStoreType)})
}

// load parses the config and resolves the node and the owner; it opens nothing.
func (p *Plugin) load(args *skel.CmdArgs) (*Config, string, Owner, error) {
	cfg, err := p.LoadConfig(args.StdinData)
	if err != nil {
		return nil, "", Owner{}, err
	}
	for _, w := range cfg.Warnings {
		p.warn(cfg, w)
	}
	node := cmp.Or(cfg.NodeName, p.Getenv(EnvNodeName))
	if node == "" {
		if node, err = p.Hostname(); err != nil {
			return nil, "", Owner{}, fmt.Errorf("rdmanet-ipam: node name: %w; fix: set node_name or NODENAME", err)
		}
	}
	owner, err := OwnerFromArgs(args.ContainerID, args.IfName, args.Args)
	if err != nil {
		return nil, "", Owner{}, err
	}
	return cfg, node, owner, nil
}

func (p *Plugin) open(cfg *Config, node string) (*Allocator, error) {
	store, err := p.OpenStore(cfg)
	if err != nil {
		return nil, err
	}
	return &Allocator{Store: store, Node: node, Lock: &FileLock{Dir: cfg.Store.Path}, StateDir: cfg.Store.Path}, nil
}

func (p *Plugin) setup(args *skel.CmdArgs) (*Config, *Allocator, Owner, error) {
	cfg, node, owner, err := p.load(args)
	if err != nil {
		return nil, nil, Owner{}, err
	}
	alloc, err := p.open(cfg, node)
	if err != nil {
		return nil, nil, Owner{}, err
	}
	return cfg, alloc, owner, nil
}

// warn writes one warning to stderr and, when the config names one, to log_file.
func (p *Plugin) warn(cfg *Config, msg string) {
	if p.Stderr != nil {
		fmt.Fprintln(p.Stderr, msg)
	}
	if cfg == nil || cfg.LogFile == "" {
		return
	}
	f, err := os.OpenFile(cfg.LogFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o640)
	if err != nil {
		if p.Stderr != nil {
			fmt.Fprintf(p.Stderr, "rdmanet-ipam: log_file: %v\n", err)
		}
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s [warning] %s\n", time.Now().UTC().Format(time.RFC3339), msg)
}

func (p *Plugin) ctx() (context.Context, context.CancelFunc) {
	t := p.Timeout
	if t <= 0 {
		t = DefaultTimeout
	}
	parent := p.Context
	if parent == nil {
		parent = context.Background()
	}
	return context.WithTimeout(parent, t)
}

// Add allocates one address per range (idempotently) and prints the result.
func (p *Plugin) Add(args *skel.CmdArgs) error {
	cfg, alloc, owner, err := p.setup(args)
	if err != nil {
		return err
	}
	ctx, cancel := p.ctx()
	defer cancel()
	res := &current.Result{CNIVersion: current.ImplementedSpecVersion, Routes: cfg.Routes, DNS: cfg.DNS}
	success := false
	defer func() {
		if !success { // roll back ranges allocated before the failure
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			for _, r := range cfg.Ranges {
				_ = alloc.Release(rctx, cfg.Pool(r), owner)
			}
		}
	}()
	for _, r := range cfg.Ranges {
		addr, err := alloc.Allocate(ctx, cfg.Network, r, owner)
		if err != nil {
			return toCNIError(err)
		}
		ipc := &current.IPConfig{Address: net.IPNet{IP: net.IP(addr.AsSlice()), Mask: net.CIDRMask(r.Prefix.Bits(), addr.BitLen())}}
		if r.Gateway.IsValid() {
			ipc.Gateway = net.IP(r.Gateway.AsSlice())
		} else if gw := cfg.Gateway; gw.IsValid() && gw.BitLen() == addr.BitLen() {
			ipc.Gateway = net.IP(gw.AsSlice()) // outside every range: returned as Whereabouts returns it (Parse warned)
		}
		res.IPs = append(res.IPs, ipc)
	}
	out, err := res.GetAsVersion(cfg.CNIVersion)
	if err != nil {
		return fmt.Errorf("rdmanet-ipam: convert result to cniVersion %s: %w", cfg.CNIVersion, err)
	}
	if err := printResult(p.Stdout, out); err != nil {
		return err
	}
	success = true
	return nil
}

// Del releases the attachment's addresses; unknown attachments succeed.
//
// A DEL with nothing to release succeeds whatever the configuration state,
// since the runtime retries a failing DEL forever and the pod never leaves
// Terminating:
//   - a config that does not load cannot have allocated anything (the
//     runtime passes DEL the config of the ADD, which failed the same way);
//   - a store that cannot be opened (no usable kubeconfig) fails DEL only
//     when this node's own records (block cache, borrow journal) show the
//     attachment holds an address; otherwise DEL succeeds with a warning,
//     and `rdmanet-ipam gc` releases whatever the attachment may hold once
//     its pod is gone.
func (p *Plugin) Del(args *skel.CmdArgs) error {
	cfg, node, owner, err := p.load(args)
	if err != nil {
		p.warn(nil, fmt.Sprintf("rdmanet-ipam: DEL of container %s interface %s: nothing to release under a config that does not load (%v); reporting success",
			args.ContainerID, args.IfName, err))
		return nil
	}
	alloc, err := p.open(cfg, node)
	if err != nil {
		if !errors.Is(err, ErrStoreUnavailable) {
			return err
		}
		if held := localRecords(cfg, node, owner); held != "" {
			return fmt.Errorf("rdmanet-ipam: DEL of container %s interface %s: this node's records show it holds %s, which cannot be released: %w",
				owner.ContainerID, owner.IfName, held, err)
		}
		p.warn(cfg, fmt.Sprintf("rdmanet-ipam: DEL of container %s interface %s: store not usable and this node's records show no address for it; reporting success (`rdmanet-ipam gc` releases any address it held once its pod is gone): %v",
			owner.ContainerID, owner.IfName, err))
		return nil
	}
	ctx, cancel := p.ctx()
	defer cancel()
	var errs []error
	for _, r := range cfg.Ranges {
		if err := alloc.Release(ctx, cfg.Pool(r), owner); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return toCNIError(err)
	}
	return nil
}

// localRecords describes the addresses this node's own state (block cache,
// borrow journal) records for owner, "" when none.
func localRecords(cfg *Config, node string, owner Owner) string {
	var held []string
	for _, r := range cfg.Ranges {
		pool := cfg.Pool(r)
		if blocks, ok := newBlockCache(cfg.Store.Path, pool, node).load(); ok {
			if b, addr, ok := findOwner(blocks, owner); ok {
				held = append(held, fmt.Sprintf("%s (block %s)", addr, b.Name))
			}
		}
		if j := newJournal(cfg.Store.Path, pool); j != nil {
			if b := j.get(owner); b != "" {
				held = append(held, "an address borrowed from block "+b)
			}
		}
	}
	return strings.Join(held, ", ")
}

// Check verifies the attachment still holds an address in every range.
func (p *Plugin) Check(args *skel.CmdArgs) error {
	cfg, alloc, owner, err := p.setup(args)
	if err != nil {
		return err
	}
	ctx, cancel := p.ctx()
	defer cancel()
	for _, r := range cfg.Ranges {
		if _, err := alloc.Lookup(ctx, cfg.Pool(r), owner); err != nil {
			return fmt.Errorf("rdmanet-ipam: network %q: container %s ifname %s holds no address in range %q: %w",
				cfg.Network, owner.ContainerID, owner.IfName, r.Spec, err)
		}
	}
	return nil
}

// OwnerFromArgs builds the owner from the CNI container ID, ifname and CNI_ARGS
// (K8S_POD_NAMESPACE, K8S_POD_NAME, K8S_POD_UID).
func OwnerFromArgs(containerID, ifName, cniArgs string) (Owner, error) {
	if containerID == "" || ifName == "" {
		return Owner{}, fmt.Errorf("rdmanet-ipam: CNI_CONTAINERID and CNI_IFNAME are required (got %q, %q)", containerID, ifName)
	}
	o := Owner{ContainerID: containerID, IfName: ifName}
	for _, kv := range strings.Split(cniArgs, ";") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		switch k {
		case "K8S_POD_NAMESPACE":
			o.PodNamespace = v
		case "K8S_POD_NAME":
			o.PodName = v
		case "K8S_POD_UID":
			o.PodUID = v
		}
	}
	return o, nil
}

// toCNIError maps retryable failures to the CNI "try again later" code.
func toCNIError(err error) error {
	if errors.Is(err, ErrTransient) || errors.Is(err, context.DeadlineExceeded) {
		return cnitypes.NewError(cnitypes.ErrTryAgainLater, err.Error(), "")
	}
	return err
}

func printResult(w io.Writer, r cnitypes.Result) error {
	if err := r.PrintTo(w); err != nil {
		return fmt.Errorf("rdmanet-ipam: print result: %w", err)
	}
	return nil
}

// Funcs adapts the plugin to skel (the rdmanet-ipam binary).
func (p *Plugin) Funcs() skel.CNIFuncs {
	verb := func(cmd string) func(*skel.CmdArgs) error {
		return func(a *skel.CmdArgs) error { return p.Verb(cmd, a) }
	}
	return skel.CNIFuncs{Add: verb("ADD"), Del: verb("DEL"), Check: verb("CHECK")}
}

// Verb runs one CNI verb (ADD, DEL or CHECK); ADD prints its result to p.Stdout.
func (p *Plugin) Verb(cmd string, a *skel.CmdArgs) error {
	switch cmd {
	case "ADD":
		return p.Add(a)
	case "DEL":
		return p.Del(a)
	case "CHECK":
		return p.Check(a)
	}
	return cnitypes.NewError(cnitypes.ErrInvalidEnvironmentVariables, fmt.Sprintf("unknown CNI_COMMAND: %v", cmd), "")
}

// Run runs one CNI verb with a plugin whose environment is getenv (nil: the
// process's) and returns what the binary prints on stdout. Each call has
// its own Plugin, store and lock file descriptors, as each process has.
// The CNI_* checks skel does before a verb are the caller's.
func Run(cmd string, args *skel.CmdArgs, getenv func(string) string) ([]byte, error) {
	return RunWith(context.Background(), cmd, args, getenv, nil)
}

// RunWith is Run for a long-running caller: ctx bounds the call, and
// stores, when not nil, reuses kubernetes stores across calls.
func RunWith(ctx context.Context, cmd string, args *skel.CmdArgs, getenv func(string) string, stores *StoreCache) ([]byte, error) {
	p := NewPlugin()
	if getenv != nil {
		p.Getenv = getenv
	}
	p.Context = ctx
	if stores != nil {
		p.OpenStore = stores.Get
	}
	var out bytes.Buffer
	p.Stdout = &out
	if err := p.Verb(cmd, args); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
