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
package meta

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/types"
)

// Defaults (Multus' where Multus has one).
const (
	DefaultConfDir            = "/etc/cni/multus/net.d"
	DefaultCNIDir             = "/var/lib/cni/rdmanet"
	DefaultBinDir             = "/opt/cni/bin"
	DefaultPodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"
	DefaultDelTimeout         = 30 * time.Second
	DefaultAPITimeout         = 10 * time.Second
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
	Kubeconfig             string            `json:"kubeconfig"`
	ClusterNetwork         string            `json:"clusterNetwork"`
	DefaultNetworks        []string          `json:"defaultNetworks"`
	RawDelegates           []json.RawMessage `json:"delegates"`
	ConfDir                string            `json:"confDir"`
	CNIDir                 string            `json:"cniDir"`
	BinDir                 string            `json:"binDir"`
	LogFile                string            `json:"logFile"`
	LogLevel               string            `json:"logLevel"`
	LogToStderr            bool              `json:"logToStderr"`
	NamespaceIsolation     bool              `json:"namespaceIsolation"`
	RawGlobalNamespaces    string            `json:"globalNamespaces"`
	SystemNamespaces       []string          `json:"systemNamespaces"`
	MultusNamespace        string            `json:"multusNamespace"`
	ReadinessIndicatorFile string            `json:"readinessindicatorfile"`
	RetryDeleteOnError     bool              `json:"retryDeleteOnError"`
	Capabilities           map[string]bool   `json:"capabilities,omitempty"`
	LogOptions             json.RawMessage   `json:"logOptions,omitempty"`
	AuxiliaryCNIChainName  string            `json:"auxiliaryCNIChainName,omitempty"`

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
	// ConcurrentNetworks runs the default network and every attachment at
	// once instead of one after the other (Multus' order). Each delegate
	// makes its own interface, so the pod ends up the same; a pod with
	// several RDMA attachments starts in the time of its slowest one.
	ConcurrentNetworks bool `json:"concurrentNetworks"`

	// Parsed forms.
	GlobalNamespaces []string      `json:"-"`
	DelTimeoutDur    time.Duration `json:"-"`
	APITimeoutDur    time.Duration `json:"-"`
	Delegates        [][]byte      `json:"-"`
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
	for _, ns := range strings.Split(c.RawGlobalNamespaces, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			c.GlobalNamespaces = append(c.GlobalNamespaces, ns)
		}
	}
	var err error
	if c.DelTimeoutDur, err = duration("delTimeout", c.DelTimeout, DefaultDelTimeout); err != nil {
		return nil, err
	}
	if c.APITimeoutDur, err = duration("apiTimeout", c.APITimeout, DefaultAPITimeout); err != nil {
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
