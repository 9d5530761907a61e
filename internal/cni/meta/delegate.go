package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/libcni"
	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
)

// Delegate is one network to run: its config list, the interface it
// creates, and what was injected.
type Delegate struct {
	Network  string          `json:"network"` // namespace/name for attachments, config name for the default
	IfName   string          `json:"ifname"`
	Conf     json.RawMessage `json:"conf"` // the conflist as run (deviceID etc. already injected)
	Resource string          `json:"resource,omitempty"`
	DeviceID string          `json:"deviceID,omitempty"`
	// Claim is the DRA claim device DeviceID came from (nil: a device
	// plugin device, or none); its claim's status gets the network data.
	Claim     *ClaimDevice `json:"claim,omitempty"`
	IsDefault bool         `json:"default,omitempty"`
	// CapabilityArgs passed through libcni (mac, ips, deviceID, ...).
	CapabilityArgs map[string]any `json:"capabilityArgs,omitempty"`
	CNIArgs        [][2]string    `json:"cniArgs,omitempty"`
	// DefaultRoute: gateways from the annotation's "default-route".
	DefaultRoute []string `json:"defaultRoute,omitempty"`
	// DelError is the last error of this delegate's DEL in a pending record.
	DelError string `json:"delError,omitempty"`
}

// confList parses a config (single plugin or list) into a list, filling a
// missing name and cniVersion, as Multus does for NAD configs.
func confList(raw []byte, name, defVersion string) (*libcni.NetworkConfigList, error) {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("CNI config of %s is not a JSON object: %w", name, err)
	}
	changed := false
	if n, _ := m["name"].(string); n == "" {
		m["name"] = name
		changed = true
	}
	if v, _ := m["cniVersion"].(string); v == "" {
		m["cniVersion"] = defVersion
		changed = true
	}
	if changed {
		var err error
		if raw, err = json.Marshal(m); err != nil {
			return nil, fmt.Errorf("CNI config of %s: %w", name, err)
		}
	}
	if _, ok := m["plugins"]; ok {
		l, err := libcni.ConfListFromBytes(raw)
		if err != nil {
			return nil, fmt.Errorf("CNI config list of %s: %w", name, err)
		}
		return l, nil
	}
	if _, ok := m["type"]; !ok {
		return nil, fmt.Errorf("CNI config of %s has neither \"type\" nor \"plugins\"", name)
	}
	c, err := libcni.ConfFromBytes(raw)
	if err != nil {
		return nil, fmt.Errorf("CNI config of %s: %w", name, err)
	}
	l, err := libcni.ConfListFromConf(c)
	if err != nil {
		return nil, fmt.Errorf("CNI config of %s: %w", name, err)
	}
	return l, nil
}

// injectChain sets deviceID (top level and runtimeConfig) on every plugin of
// the chain and, for cni-args, args.cni, returning the new list bytes.
func injectChain(l *libcni.NetworkConfigList, deviceID string, cniArgs map[string]any) ([]byte, error) {
	var top map[string]any
	if err := json.Unmarshal(l.Bytes, &top); err != nil {
		return nil, fmt.Errorf("config list %s: %w", l.Name, err)
	}
	plugins, _ := top["plugins"].([]any)
	for i, p := range plugins {
		pm, ok := p.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("config list %s: plugins[%d] is not an object", l.Name, i)
		}
		if deviceID != "" {
			pm["deviceID"] = deviceID
			rc, _ := pm["runtimeConfig"].(map[string]any)
			if rc == nil {
				rc = map[string]any{}
			}
			rc["deviceID"] = deviceID
			pm["runtimeConfig"] = rc
		}
		if len(cniArgs) > 0 {
			args, _ := pm["args"].(map[string]any)
			if args == nil {
				args = map[string]any{}
			}
			cni, _ := args["cni"].(map[string]any)
			if cni == nil {
				cni = map[string]any{}
			}
			for k, v := range cniArgs {
				cni[k] = v
			}
			args["cni"] = cni
			pm["args"] = args
		}
	}
	return json.Marshal(top)
}

// nadConfig returns a NAD's CNI config: spec.config, or, when empty, the
// on-disk config in confDir whose network name is the NAD's name.
func nadConfig(nad *nadv1.NetworkAttachmentDefinition, confDir string) ([]byte, error) {
	if strings.TrimSpace(nad.Spec.Config) != "" {
		return []byte(nad.Spec.Config), nil
	}
	l, err := libcni.LoadNetworkConf(confDir, nad.Name)
	if err != nil {
		return nil, fmt.Errorf("NetworkAttachmentDefinition %s/%s has an empty spec.config and no config named %q in %s: %w; fix: put the CNI config in spec.config or a file in %s",
			nad.Namespace, nad.Name, nad.Name, confDir, err, confDir)
	}
	return l.Bytes, nil
}

// cachedNADReader is a Source whose NAD cache can answer without the API server.
type cachedNADReader interface {
	NADCached(ctx context.Context, namespace, name string) (*nadv1.NetworkAttachmentDefinition, error)
}

// defaultNetwork resolves the cluster (default) network: the inline
// delegates, or clusterNetwork (see resolveAdminNetwork).
func (p *Plugin) defaultNetwork(ctx context.Context) (*libcni.NetworkConfigList, error) {
	c := p.Conf
	if len(c.Delegates) > 0 {
		return confList(c.Delegates[0], "delegates[0]", c.CNIVersion)
	}
	l, _, err := p.resolveAdminNetwork(ctx, c.ClusterNetwork)
	if err != nil {
		return nil, fmt.Errorf("clusterNetwork %w", err)
	}
	return l, nil
}

// resolveAdminNetwork resolves a network the node's config names
// (clusterNetwork, defaultNetworks), in Multus' order: a NAD in
// multusNamespace, a network name in confDir, or a path to a config file.
// It returns the NAD when the network is one.
func (p *Plugin) resolveAdminNetwork(ctx context.Context, cn string) (*libcni.NetworkConfigList, *nadv1.NetworkAttachmentDefinition, error) {
	c := p.Conf
	if filepath.IsAbs(cn) {
		b, err := os.ReadFile(cn)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", cn, err)
		}
		l, err := confList(b, filepath.Base(cn), c.CNIVersion)
		return l, nil, err
	}
	if p.Source != nil && c.Source.Type == "kubernetes" {
		// These NADs are long-lived and admin-managed: a cache answers (a
		// miss is "not a NAD") instead of a live read on every ADD.
		lookup := p.Source.NAD
		if cs, ok := p.Source.(cachedNADReader); ok {
			lookup = cs.NADCached
		}
		nad, err := lookup(ctx, c.MultusNamespace, cn)
		switch {
		case err == nil:
			raw, err := nadConfig(nad, c.ConfDir)
			if err != nil {
				return nil, nil, err
			}
			l, err := confList(raw, cn, c.CNIVersion)
			return l, nad, err
		case !errors.Is(err, ErrNotFound):
			p.Log.Warn("cannot look the network up as a NAD; trying confDir", "network", cn, "err", err)
		}
	}
	if p.Source != nil && c.Source.Type == "static" {
		if nad, err := p.Source.NAD(ctx, c.MultusNamespace, cn); err == nil {
			raw, err := nadConfig(nad, c.ConfDir)
			if err != nil {
				return nil, nil, err
			}
			l, err := confList(raw, cn, c.CNIVersion)
			return l, nad, err
		}
	}
	l, err := libcni.LoadNetworkConf(c.ConfDir, cn)
	if err != nil {
		return nil, nil, fmt.Errorf("%q: not a NAD in %s and no config of that name in %s: %w", cn, c.MultusNamespace, c.ConfDir, err)
	}
	return l, nil, nil
}
