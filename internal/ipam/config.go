// Package ipam is rdmanet's cluster-wide IPAM: Whereabouts-compatible config
// parsing, range arithmetic, and an allocator over a block Store (kubernetes
// CRDs or a local file). See docs/ipam.md.
package ipam

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	cnitypes "github.com/containernetworking/cni/pkg/types"
)

// Store types.
const (
	StoreLocal      = "local"
	StoreKubernetes = "kubernetes"
)

// Defaults used when neither the network config nor the node config sets a value.
const (
	DefaultNetwork        = "default"
	DefaultLocalStorePath = "/var/lib/rdmanet/ipam"
	// DefaultNodeConfigPath is the node-level config file (the equivalent of
	// Whereabouts' flat file). The agent DaemonSet writes it; its fields are
	// the same as the "ipam" object's and are overridden by the network config.
	DefaultNodeConfigPath = "/etc/cni/net.d/rdmanet-ipam.d/rdmanet-ipam.conf"
	defaultBlockBits4     = 27  // 32 addresses
	defaultBlockBits6     = 123 // 32 addresses
	maxBlockHostBits      = 12  // a block holds at most 4096 addresses (object size)
)

// ErrInvalidConfig is matched (errors.Is) by every config error.
var ErrInvalidConfig = errors.New("invalid rdmanet-ipam config")

// ConfigError names the network, the field, the bad value, the rule and the fix.
type ConfigError struct {
	Network string
	Field   string
	Value   string
	Rule    string
	Fix     string
	Err     error
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "rdmanet-ipam: network %q: ", e.Network)
	if e.Field != "" {
		fmt.Fprintf(&b, "field %q", e.Field)
		if e.Value != "" {
			fmt.Fprintf(&b, " = %q", e.Value)
		}
		b.WriteString(": ")
	}
	b.WriteString(e.Rule)
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if e.Fix != "" {
		b.WriteString("; fix: ")
		b.WriteString(e.Fix)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrInvalidConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Unwrap returns the underlying parse error, if any.
func (e *ConfigError) Unwrap() error { return e.Err }

// RawRange is one Whereabouts range entry (top level or in ipRanges).
type RawRange struct {
	Range      string   `json:"range"`
	RangeStart string   `json:"range_start,omitempty"`
	RangeEnd   string   `json:"range_end,omitempty"`
	Exclude    []string `json:"exclude,omitempty"`
}

// RawStore selects and configures the store.
type RawStore struct {
	// Type is "local" or "kubernetes".
	Type string `json:"type,omitempty"`
	// Path is a node-local directory: the allocation file of the local store,
	// and the lock files of the kubernetes store.
	Path string `json:"path,omitempty"`
	// Kubeconfig is the kubeconfig of the kubernetes store.
	Kubeconfig string `json:"kubeconfig,omitempty"`
}

// RawKubernetes is Whereabouts' "kubernetes" object.
type RawKubernetes struct {
	Kubeconfig string `json:"kubeconfig,omitempty"`
	K8sAPIRoot string `json:"k8s_api_root,omitempty"`
}

// RawIPAM is the "ipam" object as written: every Whereabouts field that
// changes allocation or the result, plus rdmanet's store/node fields.
// Whereabouts fields that only tune its own machinery (leader_*, etcd_*,
// sleep_for_race, reconciler_cron_expression, ...) are accepted and ignored;
// keys nobody knows are reported as warnings (see UnknownKeys).
type RawIPAM struct {
	Type string `json:"type"`
	RawRange
	IPRanges []RawRange `json:"ipRanges,omitempty"`
	// HistoricRanges is "ranges", a key Whereabouts never released and
	// ignores (see historicRanges).
	HistoricRanges json.RawMessage   `json:"ranges,omitempty"`
	Gateway        string            `json:"gateway,omitempty"`
	NetworkName    string            `json:"network_name,omitempty"`
	Routes         []*cnitypes.Route `json:"routes,omitempty"`
	DNS            cnitypes.DNS      `json:"dns,omitempty"`
	NodeSliceSize  string            `json:"node_slice_size,omitempty"`
	// EnableOverlappingRanges (Whereabouts; default true) protects addresses
	// across overlapping ranges of one network_name; false opts out.
	EnableOverlappingRanges *bool          `json:"enable_overlapping_ranges,omitempty"`
	Datastore               string         `json:"datastore,omitempty"`
	Kubernetes              *RawKubernetes `json:"kubernetes,omitempty"`
	// Kubeconfig is accepted at the top level too, as kubernetes.kubeconfig.
	Kubeconfig        string    `json:"kubeconfig,omitempty"`
	ConfigurationPath string    `json:"configuration_path,omitempty"`
	Store             *RawStore `json:"store,omitempty"`
	NodeName          string    `json:"node_name,omitempty"`
	LogFile           string    `json:"log_file,omitempty"`
	LogLevel          string    `json:"log_level,omitempty"`
}

// RawNetConf is the part of the CNI network config the plugin reads.
type RawNetConf struct {
	CNIVersion string   `json:"cniVersion"`
	Name       string   `json:"name"`
	IPAM       *RawIPAM `json:"ipam"`
}

// StoreConfig is the resolved store selection.
type StoreConfig struct {
	Type       string
	Path       string
	Kubeconfig string
	// TypeFrom and KubeconfigFrom say which setting chose Type and
	// Kubeconfig (e.g. `"store.type" in the node config file /etc/...`), so
	// store errors name what to fix.
	TypeFrom, KubeconfigFrom string
}

// Config is a parsed, defaulted and validated IPAM config.
type Config struct {
	CNIVersion string
	// Network is the IPAM network name: network_name, or "default".
	Network string
	Ranges  []*Range
	Routes  []*cnitypes.Route
	DNS     cnitypes.DNS
	// Gateway is the gateway as configured. A range whose CIDR holds it
	// has it as Range.Gateway (reserved, never allocated); outside every
	// range it is still returned as the gateway of the addresses of its
	// family, as Whereabouts returns it.
	Gateway netip.Addr
	Store   StoreConfig
	// NodeName is the node identity; empty means "resolve at run time"
	// (NODENAME env, then the host name).
	NodeName string
	// OverlappingRanges is enable_overlapping_ranges (default true): every
	// range's pool protects the addresses of all overlapping ranges of the
	// same network; false gives each (network, CIDR) its own address space.
	OverlappingRanges bool
	// LogFile and LogLevel are Whereabouts' log_file and log_level.
	LogFile, LogLevel string
	// Warnings are problems that do not stop the plugin (unknown keys),
	// one sentence each, for the CNI log.
	Warnings []string
	// NodeConfigPath is the node config file consulted (for messages).
	NodeConfigPath string
}

// Pool returns the pool r draws from under this config.
func (c *Config) Pool(r *Range) Pool { return r.Pool(c.Network) }

// NodeConfigPath returns where to read the node config for a network config:
// configuration_path when set, otherwise DefaultNodeConfigPath.
func NodeConfigPath(netconf []byte) string {
	var c RawNetConf
	if err := json.Unmarshal(netconf, &c); err == nil && c.IPAM != nil && c.IPAM.ConfigurationPath != "" {
		return c.IPAM.ConfigurationPath
	}
	return DefaultNodeConfigPath
}

// Env holds the environment inputs of Parse (kept explicit so Parse stays pure).
type Env struct {
	// NodeConfig is the content of the node config file (nil when absent).
	NodeConfig []byte
	// NodeConfigPath is where NodeConfig was read from (for messages).
	NodeConfigPath string
	// StorePath overrides the default store path (RDMANET_IPAM_STORE_PATH).
	StorePath string
	// StoreType selects the store when neither config does
	// (RDMANET_IPAM_STORE_TYPE): "local" is how tests and the demo choose the
	// node-local store explicitly.
	StoreType string
}

// Parse turns a CNI network config (stdin of the plugin) into a Config:
// parse → default → validate. It performs no I/O.
func Parse(netconf []byte, env Env) (*Config, error) {
	var nc RawNetConf
	if err := json.Unmarshal(netconf, &nc); err != nil {
		return nil, &ConfigError{Network: "?", Rule: "the network config is not valid JSON", Err: err,
			Fix: "pass the CNI network config (a JSON object) on stdin"}
	}
	if nc.IPAM == nil {
		return nil, &ConfigError{Network: nc.Name, Field: "ipam", Rule: "missing",
			Fix: `add "ipam": {"type": "rdmanet-ipam", "range": "<cidr>"}`}
	}
	var node RawIPAM
	var nodeKeys map[string]any
	if len(env.NodeConfig) > 0 {
		if err := json.Unmarshal(env.NodeConfig, &node); err != nil {
			return nil, &ConfigError{Network: nc.Name, Field: "configuration_path", Value: env.NodeConfigPath, Rule: "the node config file is not valid JSON", Err: err,
				Fix: "repair the node config file or remove it"}
		}
		_ = json.Unmarshal(env.NodeConfig, &nodeKeys)
	}
	cfg, err := build(nc.CNIVersion, nc.Name, nc.IPAM, &node, env)
	if err != nil {
		return nil, err
	}
	var raw struct {
		IPAM map[string]any `json:"ipam"`
	}
	_ = json.Unmarshal(netconf, &raw) // decoded above already; cannot fail differently
	for _, u := range UnknownKeys(raw.IPAM) {
		if strings.EqualFold(u.Path, "ranges") {
			continue // build warned about it, saying how it was read
		}
		cfg.Warnings = append(cfg.Warnings, fmt.Sprintf("rdmanet-ipam: network %q: ipam config: %s", nc.Name, u))
	}
	nodeFile := cmp.Or(env.NodeConfigPath, DefaultNodeConfigPath)
	for _, u := range UnknownKeys(nodeKeys) {
		cfg.Warnings = append(cfg.Warnings, fmt.Sprintf("rdmanet-ipam: network %q: node config file %s: %s", nc.Name, nodeFile, u))
	}
	return cfg, nil
}

func build(cniVersion, name string, ipam, node *RawIPAM, env Env) (*Config, error) {
	cfg := &Config{CNIVersion: cniVersion, Network: cmp.Or(ipam.NetworkName, node.NetworkName, DefaultNetwork)}
	errNet := cfg.Network
	if name != "" && ipam.NetworkName == "" {
		errNet = name + " (network_name unset: pool \"default\")"
	}
	fail := func(field, value, rule, fix string, err error) error {
		return &ConfigError{Network: errNet, Field: field, Value: value, Rule: rule, Fix: fix, Err: err}
	}
	// warn records what Whereabouts accepts but is odd: the config works,
	// and the CNI log says how it is read.
	warn := func(field, value, msg string) {
		s := fmt.Sprintf("rdmanet-ipam: network %q: field %q", errNet, field)
		if value != "" {
			s += fmt.Sprintf(" = %q", value)
		}
		cfg.Warnings = append(cfg.Warnings, s+": "+msg)
	}

	// Store selection (fail closed): network config > node config file >
	// a kubeconfig in either > $RDMANET_IPAM_STORE_TYPE > kubernetes. Only an
	// explicit "local" makes addresses node-local; the kubernetes store
	// without a usable kubeconfig fails ADD (see StoreConfig.check).
	st := StoreConfig{}
	nodeFile := "the node config file " + cmp.Or(env.NodeConfigPath, DefaultNodeConfigPath)
	setType := func(typ, from string) {
		if st.Type == "" && typ != "" {
			st.Type, st.TypeFrom = typ, from
		}
	}
	setKubeconfig := func(path, from string) {
		if st.Kubeconfig == "" && path != "" {
			st.Kubeconfig, st.KubeconfigFrom = path, from
		}
	}
	for _, src := range []struct {
		raw   *RawIPAM
		where string
	}{{ipam, "the network config"}, {node, nodeFile}} {
		if s := src.raw.Store; s != nil {
			setType(s.Type, `"store.type" in `+src.where)
			st.Path = cmp.Or(st.Path, s.Path)
			setKubeconfig(s.Kubeconfig, `"store.kubeconfig" in `+src.where)
		}
		switch src.raw.Datastore {
		case "":
		case StoreKubernetes:
			setType(StoreKubernetes, `"datastore" in `+src.where)
		default:
			warn("datastore", src.raw.Datastore, `ignored in `+src.where+`, as Whereabouts (v0.5 on, kubernetes store only) ignores it; remove it, or use "store": {"type": "local"} for the node-local store`)
		}
		if src.raw.Kubernetes != nil {
			setKubeconfig(src.raw.Kubernetes.Kubeconfig, `"kubernetes.kubeconfig" in `+src.where)
		}
		setKubeconfig(src.raw.Kubeconfig, `"kubeconfig" in `+src.where)
	}
	if st.Kubeconfig != "" {
		setType(StoreKubernetes, st.KubeconfigFrom)
	}
	setType(env.StoreType, "$"+EnvStoreType)
	setType(StoreKubernetes, "the default (no store configured: not in the network config, not in "+nodeFile+", not in $"+EnvStoreType+")")
	st.Path = cmp.Or(st.Path, env.StorePath, DefaultLocalStorePath)
	switch st.Type {
	case StoreLocal, StoreKubernetes:
	default:
		return nil, fail("store.type", st.Type, "unknown store type (set by "+st.TypeFrom+")", `use "local" or "kubernetes"`, nil)
	}
	cfg.Store = st
	cfg.NodeConfigPath = cmp.Or(env.NodeConfigPath, DefaultNodeConfigPath)
	cfg.NodeName = cmp.Or(ipam.NodeName, node.NodeName)
	cfg.LogFile = cmp.Or(ipam.LogFile, node.LogFile)
	cfg.LogLevel = cmp.Or(ipam.LogLevel, node.LogLevel)
	// Whereabouts reads enable_overlapping_ranges from the network config
	// only: it keeps the network config's value (default true) across the
	// merge of its flat file.
	cfg.OverlappingRanges = true // Whereabouts' default
	if ipam.EnableOverlappingRanges != nil {
		cfg.OverlappingRanges = *ipam.EnableOverlappingRanges
	}
	if node.EnableOverlappingRanges != nil && ipam.EnableOverlappingRanges == nil && !*node.EnableOverlappingRanges {
		warn("enable_overlapping_ranges", "false", "set in "+nodeFile+" and ignored there, as Whereabouts ignores it in its flat file: overlapping ranges stay protected; set it in the network config to opt out")
	}

	// The node config is Whereabouts' flat file: every field the network
	// config leaves empty is taken from it (Whereabouts merges the two with
	// mergo, the network config winning).
	eff := mergeNodeConfig(ipam, node)

	// Ranges: top-level range, then ipRanges (Whereabouts semantics).
	var raws []namedRange
	if eff.Range != "" {
		raws = append(raws, namedRange{field: "", raw: eff.RawRange, sloppyBounds: true})
	} else {
		for _, f := range []struct{ name, value string }{{"range_start", eff.RangeStart}, {"range_end", eff.RangeEnd}, {"exclude", strings.Join(eff.Exclude, ",")}} {
			if f.value != "" {
				warn(f.name, f.value, `ignored: there is no top-level "range" it could belong to (Whereabouts ignores it too); move it into the ipRanges entry it is meant for`)
			}
		}
	}
	for i, rr := range eff.IPRanges {
		raws = append(raws, namedRange{field: fmt.Sprintf("ipRanges[%d].", i), raw: rr})
	}
	if len(eff.HistoricRanges) > 0 {
		alias, err := historicRanges(eff.HistoricRanges, len(raws) > 0, warn, fail)
		if err != nil {
			return nil, err
		}
		raws = append(raws, alias...)
	}
	if len(raws) == 0 {
		return nil, fail("range", "", "no range configured (Whereabouts would accept this config and hand out no address, and the main plugin's ADD then fails with \"IPAM plugin returned missing IP config\")",
			`set "range": "10.60.0.0/16" (or "ipRanges": [{"range": ...}, ...] for dual-stack)`, nil)
	}
	for _, nr := range raws {
		r, err := parseRange(nr, eff.NodeSliceSize, !cfg.OverlappingRanges, warn, fail)
		if err != nil {
			return nil, err
		}
		cfg.Ranges = append(cfg.Ranges, r)
	}
	for i := range cfg.Ranges {
		for j := i + 1; j < len(cfg.Ranges); j++ {
			if cfg.Ranges[i].Prefix.Overlaps(cfg.Ranges[j].Prefix) {
				return nil, fail("ipRanges", cfg.Ranges[j].Spec, fmt.Sprintf("overlaps range %q of the same config", cfg.Ranges[i].Spec),
					"give each range of one network a distinct CIDR (one range per address family)", nil)
			}
		}
	}

	for i, rt := range eff.Routes {
		if rt == nil || rt.Dst.IP == nil {
			return nil, fail(fmt.Sprintf("routes[%d].dst", i), "", "missing destination", `write {"dst": "10.61.0.0/16"}`, nil)
		}
	}
	if eff.Gateway != "" {
		gw, lz, err := parseAddrSloppy(eff.Gateway)
		if err != nil {
			return nil, fail("gateway", eff.Gateway, "not an IP address (Whereabouts refuses it too)", "write a plain address such as 10.60.0.1", err)
		}
		if lz {
			warn("gateway", eff.Gateway, leadingZeroWarning(gw))
		}
		cfg.Gateway = gw
		placed := false
		for _, r := range cfg.Ranges {
			if r.Prefix.Contains(gw) {
				r.Gateway = gw
				placed = true
			}
		}
		if !placed {
			for i, rt := range eff.Routes {
				if rt.GW == nil && (rt.Dst.IP.To4() != nil) == gw.Is4() {
					return nil, fail("gateway", eff.Gateway, fmt.Sprintf("outside every range (%s), and routes[%d] (dst %s) has no \"gw\" of its own: the main plugin adds that route via this gateway, which is not on the interface's subnet, so its ADD fails (\"network is unreachable\"; Whereabouts accepts the config and fails there)",
						rangeSpecs(cfg.Ranges), i, rt.Dst.String()),
						fmt.Sprintf("use a gateway inside the range's CIDR, or give routes[%d] an on-link \"gw\", or drop the route (the training network needs none)", i), nil)
				}
			}
			warn("gateway", eff.Gateway, fmt.Sprintf("outside every range (%s): not on the interface's subnet; it is returned as the gateway of the %s addresses, as Whereabouts returns it, and no route uses it (a route through it would fail)",
				rangeSpecs(cfg.Ranges), family(gw)))
		}
	}
	for _, r := range cfg.Ranges {
		if r.Size().Sign() == 0 {
			return nil, fail("exclude", strings.Join(prefixStrings(r.Exclude), ","),
				fmt.Sprintf("range %q has no usable address left after range_start/range_end, exclude and gateway (every ADD would fail)", r.Spec),
				"shrink exclude or widen the range", nil)
		}
	}
	cfg.Routes = eff.Routes
	cfg.DNS = eff.DNS
	return cfg, nil
}

func family(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

func prefixStrings(ps []netip.Prefix) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

func rangeSpecs(rs []*Range) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.Prefix.String()
	}
	return strings.Join(s, ", ")
}
