package guidpool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/rdmanet/rdmanet/internal/ipam"
)

// Pool allocates GUIDs of one config for one node.
type Pool struct {
	Config *Config
	Alloc  *ipam.Allocator
	// Hook runs the subnet-manager hook (nil: Config.Hook through ExecHook).
	Hook HookRunner
}

// Open returns the pool of cfg on node (cfg.NodeName wins), over the store
// the config selects (ipam.OpenStore: fails closed without a kubeconfig).
func Open(cfg *Config, node string) (*Pool, error) {
	store, err := ipam.OpenStore(&ipam.Config{Network: cfg.Network, Store: cfg.Store, NodeConfigPath: cfg.Store.KubeconfigFrom})
	if err != nil {
		return nil, fmt.Errorf("GUID pool %s: %w", cfg.Name, err)
	}
	return New(cfg, store, node), nil
}

// New returns the pool of cfg on node over store.
func New(cfg *Config, store ipam.Store, node string) *Pool {
	node = cmp.Or(cfg.NodeName, node)
	return &Pool{Config: cfg, Alloc: &ipam.Allocator{Store: store, Node: node, Lock: &ipam.FileLock{Dir: cfg.Store.Path}, StateDir: cfg.Store.Path}}
}

// FromEnv loads the node's pool config (RDMANET_GUID_POOL_CONFIG, else
// DefaultConfigPath); no file means no pool (nil, nil).
func FromEnv(getenv func(string) string) (*Config, error) {
	path := cmp.Or(getenv(EnvConfig), DefaultConfigPath)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("GUID pool config: %w", err)
	}
	return Parse(path, b)
}

// Allocate returns owner's GUID, allocating one when owner has none (the
// same GUID on a repeated call), from the first range with a free GUID.
func (p *Pool) Allocate(ctx context.Context, owner ipam.Owner) (GUID, error) {
	if g, err := p.Lookup(ctx, owner); err == nil {
		return g, nil
	} else if !errors.Is(err, ipam.ErrNotFound) {
		return 0, err
	}
	var errs []error
	for _, r := range p.Config.Ranges {
		a, err := p.Alloc.Allocate(ctx, p.Config.Network, r.r, owner)
		if err == nil {
			g, ok := FromAddr(a)
			if !ok {
				return 0, fmt.Errorf("GUID pool %s: allocator returned %s, outside the GUID space", p.Config.Name, a)
			}
			return g, nil
		}
		if !errors.Is(err, ipam.ErrExhausted) {
			return 0, fmt.Errorf("GUID pool %s: %w", p.Config.Name, err)
		}
		errs = append(errs, err)
	}
	return 0, fmt.Errorf("GUID pool %s: every range is exhausted (%w); fix: add a range to the pool config, or find pods whose GUIDs were not released (kubectl get ipamblocks -l rdmanet.io/network)",
		p.Config.Name, errors.Join(errs...))
}

// Lookup returns owner's GUID, or an error wrapping ipam.ErrNotFound.
func (p *Pool) Lookup(ctx context.Context, owner ipam.Owner) (GUID, error) {
	for _, r := range p.Config.Ranges {
		a, err := p.Alloc.Lookup(ctx, r.r.Pool(p.Config.Network), owner)
		if errors.Is(err, ipam.ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("GUID pool %s: %w", p.Config.Name, err)
		}
		g, _ := FromAddr(a)
		return g, nil
	}
	return 0, fmt.Errorf("GUID pool %s: no GUID for container %s ifname %s: %w", p.Config.Name, owner.ContainerID, owner.IfName, ipam.ErrNotFound)
}

// Release frees owner's GUID in every range; an owner with none succeeds.
func (p *Pool) Release(ctx context.Context, owner ipam.Owner) error {
	var errs []error
	for _, r := range p.Config.Ranges {
		if err := p.Alloc.Release(ctx, r.r.Pool(p.Config.Network), owner); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("GUID pool %s: release container %s ifname %s: %w", p.Config.Name, owner.ContainerID, owner.IfName, err)
	}
	return nil
}
