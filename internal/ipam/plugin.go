package ipam

import (
	"bytes"
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
	// EnvNodeConfig overrides the node config file path (configuration_path wins over it).
	EnvNodeConfig = "RDMANET_IPAM_CONFIG"
)

// DefaultTimeout bounds one CNI call, retries included.
const DefaultTimeout = 90 * time.Second

// Plugin implements the CNI verbs over injected I/O, so tests drive it
// without exec and without touching the host.
type Plugin struct {
	Getenv   func(string) string
	ReadFile func(string) ([]byte, error)
	Hostname func() (string, error)
	// OpenStore returns the store the config selects (see OpenStore).
	OpenStore func(cfg *Config) (Store, error)
	// Stdout receives the CNI result.
	Stdout  io.Writer
	Timeout time.Duration
}

// NewPlugin returns a Plugin wired to the process environment.
func NewPlugin() *Plugin {
	return &Plugin{Getenv: os.Getenv, ReadFile: os.ReadFile, Hostname: os.Hostname, OpenStore: OpenStore, Stdout: os.Stdout, Timeout: DefaultTimeout}
}

// OpenStore opens the store selected by cfg.
func OpenStore(cfg *Config) (Store, error) {
	switch cfg.Store.Type {
	case StoreKubernetes:
		rc, err := RESTConfigFromKubeconfig(cfg.Store.Kubeconfig)
		if err != nil {
			return nil, err
		}
		rc.Timeout = 30 * time.Second
		return NewKubeStore(rc)
	default:
		return &LocalStore{Dir: cfg.Store.Path}, nil
	}
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
	return Parse(stdin, Env{NodeConfig: node, StorePath: p.Getenv(EnvStorePath)})
}

func (p *Plugin) setup(args *skel.CmdArgs) (*Config, *Allocator, Owner, error) {
	cfg, err := p.LoadConfig(args.StdinData)
	if err != nil {
		return nil, nil, Owner{}, err
	}
	node := firstNonEmpty(cfg.NodeName, p.Getenv(EnvNodeName))
	if node == "" {
		if node, err = p.Hostname(); err != nil {
			return nil, nil, Owner{}, fmt.Errorf("rdmanet-ipam: node name: %w; fix: set node_name or NODENAME", err)
		}
	}
	store, err := p.OpenStore(cfg)
	if err != nil {
		return nil, nil, Owner{}, err
	}
	owner, err := OwnerFromArgs(args.ContainerID, args.IfName, args.Args)
	if err != nil {
		return nil, nil, Owner{}, err
	}
	return cfg, &Allocator{Store: store, Node: node, Lock: &FileLock{Dir: cfg.Store.Path}, StateDir: cfg.Store.Path}, owner, nil
}

func (p *Plugin) ctx() (context.Context, context.CancelFunc) {
	t := p.Timeout
	if t <= 0 {
		t = DefaultTimeout
	}
	return context.WithTimeout(context.Background(), t)
}

// Add allocates one address per range (idempotently) and prints the result.
func (p *Plugin) Add(args *skel.CmdArgs) error {
	cfg, alloc, owner, err := p.setup(args)
	if err != nil {
		return err
	}
	ctx, cancel := p.ctx()
	defer cancel()
	res := &current.Result{CNIVersion: current.ImplementedSpecVersion, Routes: cfg.Routes}
	success := false
	defer func() {
		if !success { // roll back ranges allocated before the failure
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			for _, r := range cfg.Ranges {
				_ = alloc.Release(rctx, Pool{Network: cfg.Network, Prefix: r.Prefix}, owner)
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
func (p *Plugin) Del(args *skel.CmdArgs) error {
	cfg, alloc, owner, err := p.setup(args)
	if err != nil {
		return err
	}
	ctx, cancel := p.ctx()
	defer cancel()
	var errs []error
	for _, r := range cfg.Ranges {
		if err := alloc.Release(ctx, Pool{Network: cfg.Network, Prefix: r.Prefix}, owner); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return toCNIError(err)
	}
	return nil
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
		if _, err := alloc.Lookup(ctx, Pool{Network: cfg.Network, Prefix: r.Prefix}, owner); err != nil {
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
	p := NewPlugin()
	if getenv != nil {
		p.Getenv = getenv
	}
	var out bytes.Buffer
	p.Stdout = &out
	if err := p.Verb(cmd, args); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
