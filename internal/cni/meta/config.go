// Package meta is the rdmanet meta CNI: it reads the pod's
// k8s.v1.cni.cncf.io/networks annotation, resolves each entry to a
// NetworkAttachmentDefinition, learns which devices kubelet gave the pod
// (PodResources API), runs the default network and then every attachment's
// plugin chain through libcni with the allocated deviceID injected, writes
// the k8s.v1.cni.cncf.io/network-status annotation, and undoes everything
// on DEL — from its cache when the pod, the NAD or the API server is gone.
//
// Configuration is Multus-compatible: a Multus config file works with only
// "type" changed.
//
// This package is the plugin's logic only, behind small interfaces (Source,
// DeviceLister, ClaimStatusSetter, AsyncStatusWriter):
// the API server and kubelet clients that implement them are in meta/kube,
// the per-call main (rdmanet-direct) in meta/direct, and the daemon that
// serves it warm in internal/daemon. A call enters through ParseCall.
package meta

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/rdmanet/rdmanet/internal/cni/confkeys"
)

// Defaults (Multus' where Multus has one).
const (
	DefaultConfDir            = "/etc/cni/multus/net.d"
	DefaultCNIDir             = "/var/lib/cni/rdmanet"
	DefaultBinDir             = "/opt/cni/bin"
	DefaultPodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"
	DefaultDelTimeout         = 30 * time.Second
	DefaultAPITimeout         = 10 * time.Second
	// DefaultAddTimeout bounds ADD (and CHECK/STATUS) in the daemon: kubelet's
	// default --runtime-request-timeout, after which the runtime has given
	// up on the call anyway.
	DefaultAddTimeout = 2 * time.Minute
	// DefaultGlobalNamespace is Multus' implied globalNamespaces: with
	// namespace isolation, NADs of "default" may be used from any namespace.
	DefaultGlobalNamespace = "default"
)

// SourceConfig chooses where pods and NADs come from.
type SourceConfig struct {
	Type string `json:"type"` // "kubernetes" (default) or "static"
	Dir  string `json:"dir"`  // static: directory of pod/NAD manifests
	// StatusDir (static): where network-status is recorded per pod.
	StatusDir string `json:"statusDir"`
}

// NetConf is the meta plugin's configuration.
type NetConf struct {
	types.PluginConf

	// Multus-compatible fields.
	Kubeconfig      string            `json:"kubeconfig"`
	ClusterNetwork  string            `json:"clusterNetwork"`
	DefaultNetworks []string          `json:"defaultNetworks"`
	RawDelegates    []json.RawMessage `json:"delegates"`
	ConfDir         string            `json:"confDir"`
	CNIDir          string            `json:"cniDir"`
	BinDir          string            `json:"binDir"`
	LogFile         string            `json:"logFile"`
	LogLevel        string            `json:"logLevel"`
	LogToStderr     bool              `json:"logToStderr"`
	// RawNamespaceIsolation is namespaceIsolation as written; unset means
	// on (see NamespaceIsolation).
	RawNamespaceIsolation  *bool           `json:"namespaceIsolation,omitempty"`
	RawGlobalNamespaces    string          `json:"globalNamespaces"`
	SystemNamespaces       []string        `json:"systemNamespaces"`
	MultusNamespace        string          `json:"multusNamespace"`
	ReadinessIndicatorFile string          `json:"readinessindicatorfile"`
	RetryDeleteOnError     bool            `json:"retryDeleteOnError"`
	Capabilities           map[string]bool `json:"capabilities,omitempty"`
	LogOptions             json.RawMessage `json:"logOptions,omitempty"`
	AuxiliaryCNIChainName  string          `json:"auxiliaryCNIChainName,omitempty"`
	// RuntimeConfig is what the runtime passed for the capabilities this
	// config declares (libcni injects it): portMappings, bandwidth, ips,
	// mac, dns, cgroupPath, ... It goes to the cluster network's delegates.
	RuntimeConfig map[string]any `json:"runtimeConfig,omitempty"`

	// rdmanet fields.
	PodResourcesSocket string       `json:"podResourcesSocket"`
	DeviceInfoDir      string       `json:"deviceInfoDir"`
	Source             SourceConfig `json:"source"`
	// DaemonSocket: when set and the daemon answers, calls go to it (warm
	// caches); otherwise the plugin works per call.
	DaemonSocket string `json:"daemonSocket"`
	// DelTimeout bounds DEL: after it, DEL succeeds with a logged leak report.
	DelTimeout string `json:"delTimeout"`
	APITimeout string `json:"apiTimeout"`
	// AddTimeout bounds ADD, CHECK and STATUS in the daemon (the shim
	// sends it as the request's deadline); delegate processes still
	// running when it passes are killed and the ADD rolls back.
	AddTimeout string `json:"addTimeout"`
	// ConcurrentNetworks runs the default network and every attachment at
	// once instead of one after the other (Multus' order). Each delegate
	// makes its own interface, so the pod ends up the same; a pod with
	// several RDMA attachments starts in the time of its slowest one.
	ConcurrentNetworks bool `json:"concurrentNetworks"`

	// Parsed forms.
	// NamespaceIsolation (default on): a pod may use NADs of its own
	// namespace and of GlobalNamespaces only.
	NamespaceIsolation bool          `json:"-"`
	GlobalNamespaces   []string      `json:"-"`
	DelTimeoutDur      time.Duration `json:"-"`
	APITimeoutDur      time.Duration `json:"-"`
	AddTimeoutDur      time.Duration `json:"-"`
	Delegates          [][]byte      `json:"-"`
	// Warnings are problems that do not stop the plugin (unknown keys);
	// the caller logs them.
	Warnings []string `json:"-"`
}

// ConfigError names the field, the value, the rule and the fix.
type ConfigError struct {
	Field, Value, Rule, Fix string
}

func (e *ConfigError) Error() string {
	s := "rdmanet config: " + e.Field
	if e.Value != "" {
		s += " = " + e.Value
	}
	s += ": " + e.Rule
	if e.Fix != "" {
		s += "; fix: " + e.Fix
	}
	return s
}

// ParseConfig parses, defaults and validates the meta plugin's config. Pure.
func ParseConfig(b []byte) (*NetConf, error) {
	c := &NetConf{}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, &ConfigError{Field: "(file)", Rule: "not valid JSON: " + err.Error(), Fix: "check the network config file's syntax"}
	}
	if c.ConfDir == "" {
		c.ConfDir = DefaultConfDir
	}
	if c.CNIDir == "" {
		c.CNIDir = DefaultCNIDir
	}
	if c.BinDir == "" {
		c.BinDir = DefaultBinDir
	}
	if c.PodResourcesSocket == "" {
		c.PodResourcesSocket = DefaultPodResourcesSocket
	}
	if c.MultusNamespace == "" {
		c.MultusNamespace = "kube-system"
	}
	if c.SystemNamespaces == nil {
		c.SystemNamespaces = []string{"kube-system"}
	}
	if c.Source.Type == "" {
		c.Source.Type = "kubernetes"
	}
	c.Warnings = unknownKeys(b)
	c.NamespaceIsolation = c.RawNamespaceIsolation == nil || *c.RawNamespaceIsolation
	for _, ns := range strings.Split(c.RawGlobalNamespaces, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			c.GlobalNamespaces = append(c.GlobalNamespaces, ns)
		}
	}
	if strings.TrimSpace(c.RawGlobalNamespaces) == "" {
		c.GlobalNamespaces = []string{DefaultGlobalNamespace}
	}
	for i, n := range c.DefaultNetworks {
		if strings.TrimSpace(n) == "" {
			return nil, &ConfigError{Field: fmt.Sprintf("defaultNetworks[%d]", i), Rule: "is empty", Fix: "name a NAD in multusNamespace, a network name in confDir, or a config file path"}
		}
	}
	var err error
	if c.DelTimeoutDur, err = duration("delTimeout", c.DelTimeout, DefaultDelTimeout); err != nil {
		return nil, err
	}
	if c.APITimeoutDur, err = duration("apiTimeout", c.APITimeout, DefaultAPITimeout); err != nil {
		return nil, err
	}
	if c.AddTimeoutDur, err = duration("addTimeout", c.AddTimeout, DefaultAddTimeout); err != nil {
		return nil, err
	}
	switch c.LogLevel {
	case "", "debug", "verbose", "info", "warning", "warn", "error", "panic":
	default:
		return nil, &ConfigError{Field: "logLevel", Value: strconv.Quote(c.LogLevel), Rule: "unknown level", Fix: `use "debug", "info", "warning" or "error"`}
	}
	switch c.Source.Type {
	case "kubernetes":
	case "static":
		if c.Source.Dir == "" {
			return nil, &ConfigError{Field: "source.dir", Rule: "is required for the static source", Fix: "point it at a directory of Pod and NetworkAttachmentDefinition manifests"}
		}
		if c.Source.StatusDir == "" {
			c.Source.StatusDir = filepath.Join(c.CNIDir, "status")
		}
	default:
		return nil, &ConfigError{Field: "source.type", Value: strconv.Quote(c.Source.Type), Rule: "unknown source", Fix: `use "kubernetes" (default) or "static"`}
	}
	for i, d := range c.RawDelegates {
		var probe map[string]any
		if err := json.Unmarshal(d, &probe); err != nil {
			return nil, &ConfigError{Field: fmt.Sprintf("delegates[%d]", i), Rule: "not a JSON object", Fix: "give the default network's CNI config object"}
		}
		c.Delegates = append(c.Delegates, []byte(d))
	}
	if c.ClusterNetwork == "" && len(c.Delegates) == 0 {
		return nil, &ConfigError{Field: "clusterNetwork", Rule: "no default network: set clusterNetwork or delegates", Fix: `set "clusterNetwork" to the default network's name (a NAD in multusNamespace, a config name in confDir, or a config file path)`}
	}
	if c.ClusterNetwork != "" && len(c.Delegates) > 0 {
		return nil, &ConfigError{Field: "delegates", Rule: "set together with clusterNetwork: the default network would be ambiguous", Fix: "keep one of clusterNetwork and delegates"}
	}
	if c.Source.Type == "kubernetes" && c.Kubeconfig == "" {
		return nil, &ConfigError{Field: "kubeconfig", Rule: "is required with the kubernetes source", Fix: `set "kubeconfig" to the node's kubeconfig for rdmanet (e.g. /etc/cni/net.d/rdmanet.d/rdmanet.kubeconfig)`}
	}
	return c, nil
}

// ParseDelConfig is the configuration a DEL (or GC) works with. DEL needs
// only where the cache is (cniDir), where the plugins are (binDir), its
// time limit and the logging fields, so it must not fail because the rest of
// the config is incomplete or wrong (no kubeconfig, an unknown source, a
// clusterNetwork that no longer resolves): a DEL with nothing to clean up
// succeeds whatever the configuration state, and one with something to clean
// up runs from its cache. It returns the fully parsed config when that
// succeeds; otherwise the fields it could read, defaulted, with the parse
// error in Warnings. Pure.
func ParseDelConfig(b []byte) *NetConf {
	if c, err := ParseConfig(b); err == nil {
		return c
	} else {
		d := &NetConf{}
		// field by field, so one field of the wrong type spoils only itself
		var raw map[string]json.RawMessage
		_ = json.Unmarshal(b, &raw)
		str := func(k string, dst *string) {
			if v, ok := raw[k]; ok {
				_ = json.Unmarshal(v, dst)
			}
		}
		str("cniVersion", &d.CNIVersion)
		str("name", &d.Name)
		str("type", &d.Type)
		str("cniDir", &d.CNIDir)
		str("binDir", &d.BinDir)
		str("confDir", &d.ConfDir)
		str("logFile", &d.LogFile)
		str("logLevel", &d.LogLevel)
		str("delTimeout", &d.DelTimeout)
		if v, ok := raw["logToStderr"]; ok {
			_ = json.Unmarshal(v, &d.LogToStderr)
		}
		if v, ok := raw["retryDeleteOnError"]; ok {
			_ = json.Unmarshal(v, &d.RetryDeleteOnError)
		}
		if d.CNIDir == "" {
			d.CNIDir = DefaultCNIDir
		}
		if d.BinDir == "" {
			d.BinDir = DefaultBinDir
		}
		if d.ConfDir == "" {
			d.ConfDir = DefaultConfDir
		}
		if t, derr := duration("delTimeout", d.DelTimeout, DefaultDelTimeout); derr == nil {
			d.DelTimeoutDur = t
		} else {
			d.DelTimeoutDur = DefaultDelTimeout
		}
		d.APITimeoutDur, d.AddTimeoutDur = DefaultAPITimeout, DefaultAddTimeout
		d.Warnings = append(unknownKeys(b), "config invalid for ADD (DEL works from its cache without it): "+err.Error())
		return d
	}
}

// ConfigKeys is what the meta plugin's config may contain: the CNI keys,
// every Multus key and rdmanet's own (for the CNI log and kubectl rdma
// lint). Multus keys rdmanet accepts without acting on them are warned
// about with the reason.
var ConfigKeys = confkeys.Catalogue{
	Plugin: "rdmanet",
	Known:  append(slices.DeleteFunc(reflectKeys(NetConf{}), func(k string) bool { return k == "logOptions" || k == "auxiliaryCNIChainName" }), "cniVersions", "disableCheck", "disableGC"),
	Ignored: map[string]string{
		"daemonSocketDir":       "a Multus thick-plugin key; rdmanet's shim finds its daemon through daemonSocket",
		"socketDir":             "a Multus thick-plugin key; rdmanet's shim finds its daemon through daemonSocket",
		"auxiliaryCNIChainName": "Multus' auxiliary CNI chain is not supported by rdmanet; chain the plugins in the network's own config list",
		"logOptions":            "rdmanet does not rotate logFile; rotate it with logrotate (copytruncate) or log to stderr",
	},
}

// sourceKeys is what "source" may contain.
var sourceKeys = confkeys.Catalogue{Plugin: "rdmanet", Known: []string{"type", "dir", "statusDir"}}

// UnknownKeys lists the keys of a meta plugin config that rdmanet does not
// read, each as a sentence for the CNI log (with the key meant, when one is
// close). kubectl rdma lint can use ConfigKeys directly.
func UnknownKeys(b []byte) []string { return unknownKeys(b) }

func unknownKeys(b []byte) []string {
	var raw map[string]json.RawMessage
	if json.Unmarshal(b, &raw) != nil {
		return nil
	}
	var out []string
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, f := range ConfigKeys.Check(keys) {
		out = append(out, f.String())
	}
	var src map[string]json.RawMessage
	if v, ok := raw["source"]; ok && json.Unmarshal(v, &src) == nil {
		skeys := make([]string, 0, len(src))
		for k := range src {
			skeys = append(skeys, k)
		}
		sort.Strings(skeys)
		for _, f := range sourceKeys.Check(skeys) {
			f.Key = "source." + f.Key
			if f.Hint != "" {
				f.Hint = "source." + f.Hint
			}
			out = append(out, f.String())
		}
	}
	return out
}

func duration(field, v string, def time.Duration) (time.Duration, error) {
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, &ConfigError{Field: field, Value: strconv.Quote(v), Rule: "not a positive duration", Fix: `write e.g. "30s"`}
	}
	return d, nil
}

// IsGlobal reports whether NADs in ns may be used from any namespace.
func (c *NetConf) IsGlobal(ns string) bool {
	for _, g := range c.GlobalNamespaces {
		if g == ns {
			return true
		}
	}
	return false
}

// reflectKeys are the JSON keys of a struct's fields, embedded structs
// included.
func reflectKeys(v any) []string {
	var out []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.Anonymous && tag == "" {
				walk(f.Type)
				continue
			}
			if tag != "" && tag != "-" {
				out = append(out, tag)
			}
		}
	}
	walk(reflect.TypeOf(v))
	return out
}
