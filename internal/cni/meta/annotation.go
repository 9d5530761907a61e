package meta

import (
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"strings"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"

	"github.com/rdmanet/rdmanet/internal/netsel"
)

// Annotation keys of the Network Plumbing WG multi-network spec.
const (
	NetworksAnnotation      = "k8s.v1.cni.cncf.io/networks"
	NetworkStatusAnnotation = "k8s.v1.cni.cncf.io/network-status"
	ResourceNameAnnotation  = "k8s.v1.cni.cncf.io/resourceName"
)

// Selection is one requested attachment, normalised: namespace and
// interface name are always set.
type Selection struct {
	Namespace      string
	Name           string
	Interface      string
	MAC            string
	IPs            []string
	DefaultRoute   []net.IP
	CNIArgs        map[string]any
	DeviceID       string
	InfinibandGUID string
	PortMappings   []*nadv1.PortMapEntry
	Bandwidth      *nadv1.BandwidthEntry
}

// Key is namespace/name.
func (s Selection) Key() string { return s.Namespace + "/" + s.Name }

// deviceIDField is what Multus' element reads beyond the NPWG type: the
// device selection extension ("deviceID") and the pre-3.2 spelling of
// "interface" ("interfaceRequest"), still read when "interface" is empty.
type deviceIDField struct {
	DeviceID         string `json:"deviceID,omitempty"`
	InterfaceRequest string `json:"interfaceRequest,omitempty"`
}

// AnnotationError names the pod, the annotation and what is wrong.
type AnnotationError struct {
	Pod    string // namespace/name
	Detail string
	Err    error // the syntax error, when there is one
}

func (e *AnnotationError) Unwrap() error { return e.Err }

func (e *AnnotationError) Error() string {
	return fmt.Sprintf("pod %s: annotation %s: %s", e.Pod, NetworksAnnotation, e.Detail)
}

// DNS-1123 label (names and namespaces), and Linux interface names.
var (
	dns1123Label  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dns1123Sub    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	interfaceName = regexp.MustCompile(`^[^\s/:]{1,15}$`)
)

// ParseNetworks parses the value of k8s.v1.cni.cncf.io/networks in either
// form — the short comma-separated list ("net-a,other-ns/net-b@net2") or
// the JSON list — and fills the defaults: the pod's namespace, and
// interface names net1, net2, … in order for entries that name none.
// pod is namespace/name, used in errors.
func ParseNetworks(value, podNamespace, pod string) ([]Selection, error) {
	return parseNetworks(value, podNamespace, pod, nil)
}

// parseNetworks is ParseNetworks with interface names already taken (by
// defaultNetworks): default names skip them, and an entry asking for one is
// refused.
func parseNetworks(value, podNamespace, pod string, reserved map[string]bool) ([]Selection, error) {
	if value == "" {
		return nil, nil
	}
	v := strings.TrimSpace(value)
	fail := func(format string, a ...any) error {
		return &AnnotationError{Pod: pod, Detail: fmt.Sprintf(format, a...)}
	}
	if v == "" {
		return nil, fail("the value is only spaces: Multus reads it as one network with an empty name and fails; remove the annotation or name a network")
	}
	var out []Selection
	// Multus takes the JSON form when the value holds '[', '{' or '"'
	if netsel.IsJSON(v) {
		if strings.HasPrefix(v, "{") {
			return nil, fail("the JSON form must be a list: wrap the object in [ ] (Multus refuses a bare object)")
		}
		var elems []*nadv1.NetworkSelectionElement
		var ids []*deviceIDField
		if err := json.Unmarshal([]byte(v), &elems); err != nil {
			return nil, fail("not a valid JSON list of network selection elements (Multus reads the value as JSON because it holds '[', '{' or '\"'): %v; e.g. [{\"name\":\"face-training-rdma\",\"interface\":\"net1\"}]", err)
		}
		if err := json.Unmarshal([]byte(v), &ids); err != nil {
			return nil, fail("not a valid JSON list of network selection elements: %v", err)
		}
		for i, e := range elems {
			if e == nil {
				return nil, fail("element %d is null (Multus crashes on it); remove it", i)
			}
			s := Selection{
				Namespace: e.Namespace, Name: e.Name, Interface: e.InterfaceRequest, MAC: e.MacRequest,
				IPs: e.IPRequest, DefaultRoute: e.GatewayRequest, DeviceID: ids[i].DeviceID,
				InfinibandGUID: e.InfinibandGUIDRequest, PortMappings: e.PortMappingsRequest, Bandwidth: e.BandwidthRequest,
			}
			if s.Interface == "" {
				s.Interface = ids[i].InterfaceRequest
			}
			if e.CNIArgs != nil {
				s.CNIArgs = *e.CNIArgs
			}
			if s.Name == "" {
				return nil, fail("element %d has no \"name\" (Multus takes it and then finds no NetworkAttachmentDefinition); name the network", i)
			}
			out = append(out, s)
		}
	} else {
		for i, item := range strings.Split(v, ",") {
			if strings.TrimSpace(item) == "" {
				return nil, fail("entry %d is empty (stray comma?): Multus takes it as a network with an empty name and fails; remove it", i)
			}
			sh, err := netsel.ParseShort(item)
			if err != nil {
				return nil, &AnnotationError{Pod: pod, Detail: err.Error(), Err: err}
			}
			if sh.Name == "" {
				return nil, fail("entry %q has no network name (Multus takes it and then finds no NetworkAttachmentDefinition); write [<namespace>/]<name>[@<interface>]", strings.TrimSpace(item))
			}
			out = append(out, Selection{Namespace: sh.Namespace, Name: sh.Name, Interface: sh.Interface})
		}
	}
	used := map[string]int{}
	for i := range out {
		s := &out[i]
		if s.Namespace == "" {
			s.Namespace = podNamespace
		}
		if !dns1123Sub.MatchString(s.Name) || len(s.Name) > 253 {
			return nil, fail("network name %q is not a valid object name (lower case letters, digits, '-', '.')", s.Name)
		}
		if !dns1123Label.MatchString(s.Namespace) || len(s.Namespace) > 63 {
			return nil, fail("namespace %q of network %q is not a valid namespace name", s.Namespace, s.Name)
		}
		if s.Interface != "" {
			if !interfaceName.MatchString(s.Interface) || s.Interface == "." || s.Interface == ".." {
				return nil, fail("interface %q for network %s is not a valid Linux interface name (1-15 characters, no '/', ':' or spaces)", s.Interface, s.Key())
			}
		}
		if s.MAC != "" {
			if _, err := net.ParseMAC(s.MAC); err != nil {
				return nil, fail("mac %q for network %s is not a MAC address", s.MAC, s.Key())
			}
		}
		if s.InfinibandGUID != "" {
			if _, err := net.ParseMAC(s.InfinibandGUID); err != nil {
				return nil, fail("infiniband-guid %q for network %s is not a GUID (8 bytes, e.g. c2:11:22:33:44:55:66:77)", s.InfinibandGUID, s.Key())
			}
		}
		for _, ip := range s.IPs {
			if strings.Contains(ip, "/") {
				if _, _, err := net.ParseCIDR(ip); err != nil {
					return nil, fail("ips entry %q for network %s is not a CIDR", ip, s.Key())
				}
			} else if net.ParseIP(ip) == nil {
				return nil, fail("ips entry %q for network %s is not an IP address", ip, s.Key())
			}
		}
		for _, gw := range s.DefaultRoute {
			if gw == nil {
				return nil, fail("default-route entry for network %s is not an IP address", s.Key())
			}
		}
	}
	// default interface names: net1, net2, ... by position, skipping names
	// the pod chose itself
	for _, s := range out {
		if s.Interface != "" {
			if reserved[s.Interface] {
				return nil, fail("network %s asks for interface %q, which a network of the node's defaultNetworks has; pick another name", s.Key(), s.Interface)
			}
			used[s.Interface]++
		}
	}
	for name := range reserved {
		used[name]++
	}
	for i := range out {
		if out[i].Interface != "" {
			continue
		}
		for n := i + 1; ; n++ {
			name := fmt.Sprintf("net%d", n)
			if used[name] == 0 {
				out[i].Interface = name
				used[name]++
				break
			}
		}
	}
	for name, n := range used {
		if n > 1 && !reserved[name] {
			return nil, fail("interface %q is requested more than once", name)
		}
	}
	for _, s := range out {
		if s.Interface == "eth0" {
			return nil, fail("network %s asks for interface eth0, which belongs to the cluster's default network; pick another name (e.g. net1)", s.Key())
		}
	}
	return out, nil
}
