package manifest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/rdmanet/rdmanet/internal/netsel"
)

// Annotation keys understood by the tooling.
const (
	NetworksAnnotation     = "k8s.v1.cni.cncf.io/networks"
	ResourceNameAnnotation = "k8s.v1.cni.cncf.io/resourceName"
	TKENetworksAnnotation  = "tke.cloud.tencent.com/networks"
)

// NetworkSelection is one secondary network requested by a pod.
type NetworkSelection struct {
	Name      string
	Namespace string // "" = the pod's namespace
	// Interface is the in-pod interface name: explicit ("@net1" or
	// "interface") or the name Multus gives by position (net1, net2, ...).
	Interface         string
	InterfaceExplicit bool
	// DefaultRoute lists the gateways of a "default-route" request.
	DefaultRoute []string
	// Annotation is the key it came from, Index its position in the list.
	Annotation string
	Index      int
}

// networkSelectionJSON is the Multus JSON form of one element, with the
// fields Multus validates while parsing.
type networkSelectionJSON struct {
	Name         string   `json:"name"`
	Namespace    string   `json:"namespace"`
	Interface    string   `json:"interface"`
	DefaultRoute []string `json:"default-route"`
	// InterfaceRequest is the pre-3.2 spelling of "interface", which
	// Multus still reads when "interface" is empty.
	InterfaceRequest string   `json:"interfaceRequest"`
	MAC              string   `json:"mac"`
	InfinibandGUID   string   `json:"infiniband-guid"`
	IPs              []string `json:"ips"`
}

// ParseNetworks parses a networks annotation value in either Multus form: a
// JSON list of selection objects or a comma-separated list of
// "[namespace/]name[@interface]". It refuses what Multus refuses (see
// internal/netsel), and what Multus takes but fails on later: an element
// without a name, an empty element, a value of only spaces.
//
// For the TKE vendor annotation the first element is the pod's default
// network (tke-bridge, tke-route-eni, ...); it is skipped, so the result
// holds only the secondary networks.
func ParseNetworks(key, value string) ([]NetworkSelection, error) {
	if value == "" {
		return nil, nil
	}
	v := strings.TrimSpace(value)
	if v == "" {
		return nil, errors.New("the value is only spaces: Multus reads it as one network with an empty name and fails; remove the annotation or name a network")
	}
	var out []NetworkSelection
	if netsel.IsJSON(v) {
		if strings.HasPrefix(v, "{") {
			return nil, errors.New(`the JSON form must be a list: wrap the object in [ ] (Multus refuses a bare object)`)
		}
		var elems []*networkSelectionJSON
		if err := json.Unmarshal([]byte(v), &elems); err != nil {
			return nil, fmt.Errorf("not a JSON list of network selections (Multus reads the value as JSON because it holds '[', '{' or '\"'): %w", err)
		}
		for i, e := range elems {
			if e == nil {
				return nil, fmt.Errorf("element %d is null (Multus crashes on it); remove it", i)
			}
			if e.Interface == "" {
				e.Interface = e.InterfaceRequest
			}
			if e.Name == "" {
				return nil, fmt.Errorf("element %d has no \"name\" (Multus takes it and then finds no NetworkAttachmentDefinition); name the network", i)
			}
			if e.MAC != "" {
				if _, err := net.ParseMAC(e.MAC); err != nil {
					return nil, fmt.Errorf("element %d (%s): mac %q is not a MAC address (Multus refuses it): %w", i, e.Name, e.MAC, err)
				}
			}
			if e.InfinibandGUID != "" {
				if _, err := net.ParseMAC(e.InfinibandGUID); err != nil {
					return nil, fmt.Errorf("element %d (%s): infiniband-guid %q is not a GUID (Multus refuses it): %w", i, e.Name, e.InfinibandGUID, err)
				}
			}
			for _, ip := range e.IPs {
				if strings.Contains(ip, "/") {
					if _, _, err := net.ParseCIDR(ip); err != nil {
						return nil, fmt.Errorf("element %d (%s): ips entry %q is not a CIDR (Multus refuses it): %w", i, e.Name, ip, err)
					}
				} else if net.ParseIP(ip) == nil {
					return nil, fmt.Errorf("element %d (%s): ips entry %q is not an IP address (Multus refuses it)", i, e.Name, ip)
				}
			}
			for _, gw := range e.DefaultRoute {
				if net.ParseIP(gw) == nil {
					return nil, fmt.Errorf("element %d (%s): default-route entry %q is not an IP address (Multus refuses it)", i, e.Name, gw)
				}
			}
			out = append(out, NetworkSelection{Name: e.Name, Namespace: e.Namespace, Interface: e.Interface, InterfaceExplicit: e.Interface != "", DefaultRoute: e.DefaultRoute, Annotation: key, Index: i})
		}
	} else {
		for i, part := range strings.Split(v, ",") {
			if strings.TrimSpace(part) == "" {
				return nil, fmt.Errorf("element %d is empty (a stray comma?): Multus takes it as a network with an empty name and fails; remove it", i)
			}
			sh, err := netsel.ParseShort(part)
			if err != nil {
				return nil, fmt.Errorf("element %d: %w", i, err)
			}
			if sh.Name == "" {
				return nil, fmt.Errorf("element %d %q has no network name (Multus takes it and then finds no NetworkAttachmentDefinition); write [<namespace>/]<name>[@<interface>]", i, strings.TrimSpace(part))
			}
			out = append(out, NetworkSelection{Name: sh.Name, Namespace: sh.Namespace, Interface: sh.Interface, InterfaceExplicit: sh.Interface != "", Annotation: key, Index: i})
		}
	}
	if key == TKENetworksAnnotation && len(out) > 0 {
		out = out[1:]
		for i := range out {
			out[i].Index = i
		}
	}
	// Multus names unnamed secondary interfaces net1, net2, ... by position.
	for i := range out {
		if out[i].Interface == "" && key != TKENetworksAnnotation {
			out[i].Interface = fmt.Sprintf("net%d", i+1)
		}
	}
	return out, nil
}

// CNIPlugin is one plugin of a CNI configuration.
type CNIPlugin struct {
	Type  string
	Index int // position in "plugins" (0 for a single-plugin config)
	Raw   map[string]any
}

// IPAM returns the plugin's ipam section (nil when absent).
func (p CNIPlugin) IPAM() map[string]any {
	m, _ := p.Raw["ipam"].(map[string]any)
	return m
}

// CNIConfig is a NetworkAttachmentDefinition's spec.config.
type CNIConfig struct {
	Name       string
	CNIVersion string
	Plugins    []CNIPlugin
	// List tells whether the config is a conflist ("plugins": [...]).
	List bool
}

// PluginPath is the field path of a plugin inside spec.config, for messages.
func (c *CNIConfig) PluginPath(i int) string {
	if !c.List {
		return "spec.config"
	}
	return fmt.Sprintf("spec.config.plugins[%d]", i)
}

// Has tells whether any plugin has the type.
func (c *CNIConfig) Has(typ string) bool { return c.Index(typ) >= 0 }

// Index is the position of the first plugin of a type, -1 if none.
func (c *CNIConfig) Index(typ string) int {
	if c == nil {
		return -1
	}
	for _, p := range c.Plugins {
		if p.Type == typ {
			return p.Index
		}
	}
	return -1
}

// ParseCNIConfig parses a CNI network configuration or configuration list.
func ParseCNIConfig(s string) (*CNIConfig, error) {
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	c := &CNIConfig{}
	c.Name, _ = m["name"].(string)
	c.CNIVersion, _ = m["cniVersion"].(string)
	if pl, ok := m["plugins"]; ok {
		c.List = true
		list, ok := pl.([]any)
		if !ok {
			return nil, fmt.Errorf("\"plugins\" is a %s, want a list", typeName(pl))
		}
		if len(list) == 0 {
			return nil, fmt.Errorf("\"plugins\" is empty")
		}
		for i, it := range list {
			pm, ok := it.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("plugins[%d] is a %s, want an object", i, typeName(it))
			}
			t, _ := pm["type"].(string)
			if t == "" {
				return nil, fmt.Errorf("plugins[%d] has no \"type\"", i)
			}
			c.Plugins = append(c.Plugins, CNIPlugin{Type: t, Index: i, Raw: pm})
		}
		return c, nil
	}
	t, _ := m["type"].(string)
	if t == "" {
		return nil, fmt.Errorf("has neither \"type\" nor \"plugins\"")
	}
	c.Plugins = []CNIPlugin{{Type: t, Raw: m}}
	return c, nil
}

// NAD is a NetworkAttachmentDefinition, either in the input or generated by an
// operator object in the input (MacvlanNetwork, SpiderMultusConfig, ...).
type NAD struct {
	Obj          *Object // the object in the input (the NAD or its generator)
	Namespace    string
	Name         string
	ResourceName string // k8s.v1.cni.cncf.io/resourceName
	// ResourceField is where ResourceName is set, for messages.
	ResourceField string
	Config        *CNIConfig
	ConfigErr     error
	// ConfigField is where the CNI config lives in Obj.
	ConfigField string
	// Master is the parent interface for macvlan/ipvlan networks.
	Master string
	// MasterField is where Master is set.
	MasterField string
	// MTU is the configured MTU (0 = unset).
	MTU int
	// Generated is true when Obj is an operator object, not a NAD.
	Generated bool
}

// Ref names the NAD as it will exist in the cluster.
func (n *NAD) Ref() string { return Ref("NetworkAttachmentDefinition", n.Namespace, n.Name) }

// NADFromObject returns the NADs an object stands for: a NAD itself, or the
// NAD an operator generates from a MacvlanNetwork, IPoIBNetwork or
// SpiderMultusConfig. Nil for other objects.
func NADFromObject(o *Object) []*NAD {
	switch {
	case o.Kind == "NetworkAttachmentDefinition" && o.Group() == "k8s.cni.cncf.io":
		n := &NAD{Obj: o, Namespace: o.Namespace, Name: o.Name, ConfigField: "spec.config",
			ResourceName: o.Annotations[ResourceNameAnnotation], ResourceField: "metadata.annotations[" + ResourceNameAnnotation + "]"}
		cfg := GetString(o.Data, "spec.config")
		if strings.TrimSpace(cfg) == "" {
			n.ConfigErr = fmt.Errorf("spec.config is empty (the config would be read from a file on every node; lint cannot check it)")
		} else {
			n.Config, n.ConfigErr = ParseCNIConfig(cfg)
		}
		if n.Config != nil {
			for _, p := range n.Config.Plugins {
				if p.Type == "macvlan" || p.Type == "ipvlan" {
					n.Master, _ = p.Raw["master"].(string)
					n.MasterField = n.Config.PluginPath(p.Index) + ".master"
					n.MTU, _ = Int(p.Raw["mtu"])
				}
			}
		}
		return []*NAD{n}
	case o.Kind == "MacvlanNetwork" && o.Group() == "mellanox.com":
		ns := GetString(o.Data, "spec.networkNamespace")
		if ns == "" {
			ns = "default"
		}
		n := &NAD{Obj: o, Namespace: ns, Name: o.Name, Generated: true, ConfigField: "spec"}
		n.Master = GetString(o.Data, "spec.master")
		n.MasterField = "spec.master"
		n.MTU, _ = Int(GetAny(o.Data, "spec.mtu"))
		p := map[string]any{"type": "macvlan", "master": n.Master, "mode": GetString(o.Data, "spec.mode")}
		if ipamStr := GetString(o.Data, "spec.ipam"); strings.TrimSpace(ipamStr) != "" {
			var ipam map[string]any
			if err := json.Unmarshal([]byte(ipamStr), &ipam); err != nil {
				n.ConfigErr = fmt.Errorf("spec.ipam is not valid JSON: %w", err)
			} else {
				p["ipam"] = ipam
			}
		}
		n.Config = &CNIConfig{Name: o.Name, Plugins: []CNIPlugin{{Type: "macvlan", Raw: p}}}
		n.ConfigField = "spec"
		return []*NAD{n}
	case o.Kind == "IPoIBNetwork" && o.Group() == "mellanox.com":
		ns := GetString(o.Data, "spec.networkNamespace")
		if ns == "" {
			ns = "default"
		}
		n := &NAD{Obj: o, Namespace: ns, Name: o.Name, Generated: true, ConfigField: "spec"}
		n.Master = GetString(o.Data, "spec.master")
		n.MasterField = "spec.master"
		p := map[string]any{"type": "ipoib", "master": n.Master}
		if ipamStr := GetString(o.Data, "spec.ipam"); ipamStr != "" {
			var ipam map[string]any
			if json.Unmarshal([]byte(ipamStr), &ipam) == nil {
				p["ipam"] = ipam
			}
		}
		n.Config = &CNIConfig{Name: o.Name, Plugins: []CNIPlugin{{Type: "ipoib", Raw: p}}}
		return []*NAD{n}
	case (o.Kind == "SriovNetwork" || o.Kind == "SriovIBNetwork") && o.Group() == "sriovnetwork.openshift.io":
		// The SR-IOV network operator writes a NAD named like the CR into
		// spec.networkNamespace (default: the CR's namespace) with resourceName
		// openshift.io/<spec.resourceName>.
		ns := GetString(o.Data, "spec.networkNamespace")
		if ns == "" {
			ns = o.Namespace
		}
		typ := "sriov"
		if o.Kind == "SriovIBNetwork" {
			typ = "ib-sriov"
		}
		n := &NAD{Obj: o, Namespace: ns, Name: o.Name, Generated: true, ConfigField: "spec"}
		if rn := GetString(o.Data, "spec.resourceName"); rn != "" {
			n.ResourceName, n.ResourceField = "openshift.io/"+rn, "spec.resourceName"
		}
		p := map[string]any{"type": typ}
		if v, ok := GetAny(o.Data, "spec.vlan").(float64); ok {
			p["vlan"] = v
		}
		if ipamStr := GetString(o.Data, "spec.ipam"); strings.TrimSpace(ipamStr) != "" {
			var ipam map[string]any
			if err := json.Unmarshal([]byte(ipamStr), &ipam); err != nil {
				n.ConfigErr = fmt.Errorf("spec.ipam is not valid JSON: %w", err)
			} else {
				p["ipam"] = ipam
			}
		}
		plugins := []CNIPlugin{{Type: typ, Raw: p}}
		if mp := GetString(o.Data, "spec.metaPlugins"); strings.Contains(mp, `"rdma"`) {
			plugins = append(plugins, CNIPlugin{Type: "rdma", Index: 1, Raw: map[string]any{"type": "rdma"}})
		}
		n.Config = &CNIConfig{Name: o.Name, Plugins: plugins, List: len(plugins) > 1}
		return []*NAD{n}
	case o.Kind == "SpiderMultusConfig" && o.Group() == "spiderpool.spidernet.io":
		n := &NAD{Obj: o, Namespace: o.Namespace, Name: o.Name, Generated: true, ConfigField: "spec"}
		cni := GetString(o.Data, "spec.cniType")
		if cni == "" {
			cni = "macvlan"
		}
		p := map[string]any{"type": cni, "ipam": map[string]any{"type": "spiderpool"}}
		plugins := []CNIPlugin{}
		switch cni {
		case "macvlan", "ipvlan":
			masters := StringList(GetAny(o.Data, "spec."+cni+".master"))
			if len(masters) > 0 {
				n.Master = masters[0]
				p["master"] = masters[0]
			}
			n.MasterField = "spec." + cni + ".master"
			if rn := GetString(o.Data, "spec."+cni+".rdmaResourceName"); rn != "" {
				n.ResourceName, n.ResourceField = rn, "spec."+cni+".rdmaResourceName"
			}
		case "sriov":
			if rn := GetString(o.Data, "spec.sriov.resourceName"); rn != "" {
				n.ResourceName, n.ResourceField = rn, "spec.sriov.resourceName"
			}
		}
		plugins = append(plugins, CNIPlugin{Type: cni, Raw: p})
		rdmaOn := GetAny(o.Data, "spec.enableRdma") == true || GetAny(o.Data, "spec."+cni+".enableRdma") == true
		if rdmaOn && cni == "sriov" {
			plugins = append(plugins, CNIPlugin{Type: "rdma", Index: 1, Raw: map[string]any{"type": "rdma"}})
		}
		n.Config = &CNIConfig{Name: o.Name, Plugins: plugins, List: len(plugins) > 1}
		return []*NAD{n}
	}
	return nil
}

// PluginsOrEmpty returns the plugins of a possibly nil config.
func (c *CNIConfig) PluginsOrEmpty() []CNIPlugin {
	if c == nil {
		return nil
	}
	return c.Plugins
}
