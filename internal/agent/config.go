package agent

// The pool configuration files, read as the upstream device plugins read
// them and merged, with their warnings and the pools rdmanet skips.

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/rdmanet/rdmanet/internal/deviceplugin/config"
)

// ConfigWarning is a warning of one pool configuration file: input the
// upstream plugins accept, and so does rdmanet, that is probably not what
// its author meant (a key in another case, an unknown key, a pool rdmanet
// skips, a selector value that never matches).
type ConfigWarning struct {
	File string `json:"file"`
	// Pool is the pool's resource name, "" for a warning about the file.
	Pool    string `json:"pool,omitempty"`
	Field   string `json:"field,omitempty"`
	Value   string `json:"value,omitempty"`
	Message string `json:"message"` // the whole warning, as config.Warning.String
}

// SkippedPool is a pool of a configuration file that rdmanet does not serve
// (an accelerator, auxNetDevice, vhost-net, vDPA, DDP, pKeys ... pool).
type SkippedPool struct {
	File     string `json:"file"`
	Resource string `json:"resource"`
	Reason   string `json:"reason"`
}

// Config is what the pool configuration files give.
type Config struct {
	Pools    []config.Pool
	Skipped  []SkippedPool
	Warnings []ConfigWarning
}

// LoadConfig reads and merges the pool configuration files, dropping the
// warnings; LoadConfigFiles keeps them.
func LoadConfig(paths []string) ([]config.Pool, error) {
	c, err := LoadConfigFiles(paths)
	if err != nil {
		return nil, err
	}
	return c.Pools, nil
}

// LoadConfigFiles reads the pool configuration files as the upstream
// plugins read them (config.ParseFile) and merges their pools. A file whose
// pools rdmanet skips all is fine next to others; files that leave rdmanet
// nothing to serve are an error naming every skipped pool.
func LoadConfigFiles(paths []string) (*Config, error) {
	if len(paths) == 0 {
		return nil, errors.New("no pool configuration: give --config with the SR-IOV device plugin config.json (resourceList) and/or the rdma-shared-dev-plugin config (configList)")
	}
	c := &Config{}
	var sets [][]config.Pool
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read pool config: %w", err)
		}
		f, err := config.ParseFile(p, b)
		if err != nil {
			return nil, fmt.Errorf("pool config: %w", err)
		}
		sets = append(sets, f.Pools)
		for _, s := range f.Skipped {
			c.Skipped = append(c.Skipped, SkippedPool{File: p, Resource: s.Resource, Reason: s.Reason})
		}
		for _, w := range f.Warnings {
			c.Warnings = append(c.Warnings, ConfigWarning{File: p, Pool: w.Pool, Field: w.Field, Value: w.Value, Message: w.String()})
		}
	}
	pools, err := config.Merge(sets...)
	if err != nil {
		return nil, err
	}
	if len(pools) == 0 {
		var why []string
		for _, s := range c.Skipped {
			why = append(why, fmt.Sprintf("%s: %s: %s", s.File, s.Resource, s.Reason))
		}
		return nil, &config.Error{Origin: strings.Join(paths, ", "), Rule: "hold no pool rdmanet serves: " + strings.Join(why, "; "), Fix: "give rdmanet the RDMA pools (netDevice pools of VFs, or rdma-shared-dev-plugin pools)"}
	}
	c.Pools = pools
	return c, nil
}

// Log logs every warning and skipped pool once, naming file and pool.
func (c *Config) Log(log *slog.Logger) {
	for _, w := range c.Warnings {
		log.Warn("pool config: "+w.Message, "file", w.File, "pool", w.Pool, "field", w.Field, "value", w.Value)
	}
	for _, s := range c.Skipped {
		log.Warn("pool config: pool not served by rdmanet", "file", s.File, "pool", s.Resource, "reason", s.Reason)
	}
}
