package devinfo

// rdmanet's InfiniBand extension of the pod's network-status and of a DRA
// claim's device status: the GUID an attachment got and its network's PKey,
// so a fabric manager (and the controller's GUID GC) can see which GUID must
// be in which partition. Multus' network-status schema has no field for
// them; Go readers (nadv1.NetworkStatus, Multus, kubectl rdma) ignore the
// extra "infiniband" key, as encoding/json ignores unknown keys.

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Plugin types whose attachments carry the InfiniBand extension.
const (
	TypeIBSriov = "ib-sriov" // exclusive: a VF with the pod's own GUID
	TypeIPoIB   = "ipoib"    // shared: an IPoIB child of the port's netdev
)

// InfiniBand is the extension: for an ib-sriov attachment the GUID set on the
// pod's VF (node and port GUID, `ip link` form), for an ipoib attachment the
// shared port's GUID (the last 8 bytes of the IPoIB hardware address, when
// the result carries one); the PKey as the network configures it, in the
// form the GUID pool hook is told (0x%04x), "" when the network names none.
type InfiniBand struct {
	GUID string `json:"guid,omitempty"`
	PKey string `json:"pkey,omitempty"`
	// Plugin is the attachment's plugin type (ib-sriov or ipoib): an ib-sriov
	// GUID is the pod's own, an ipoib GUID is the node port's, shared.
	Plugin string `json:"plugin"`
}

// NetworkStatus is one entry of the k8s.v1.cni.cncf.io/network-status
// annotation: Multus' entry with the "infiniband" extension. Every field of
// nadv1.NetworkStatus is promoted, so code that reads or builds entries
// compiles unchanged; it marshals as the Multus entry plus "infiniband".
type NetworkStatus struct {
	nadv1.NetworkStatus
	InfiniBand *InfiniBand `json:"infiniband,omitempty"`
}

// Statuses wraps Multus entries as entries without the extension (nil for
// nil): for writers that build network-status without InfiniBand data.
func Statuses(in []nadv1.NetworkStatus) []NetworkStatus {
	if in == nil {
		return nil
	}
	out := make([]NetworkStatus, len(in))
	for i, s := range in {
		out[i].NetworkStatus = s
	}
	return out
}

// InfiniBandOf is the extension of an attachment whose delegate config
// (the conflist as run, or a single plugin config) is conf and whose CNI
// result interface has MAC mac; nil when the attachment is neither
// ib-sriov nor ipoib, or conf is not a CNI config. Pure.
func InfiniBandOf(conf []byte, mac string) *InfiniBand {
	plugin, pkey, ok := ibPlugin(conf)
	if !ok {
		return nil
	}
	ib := &InfiniBand{Plugin: plugin, PKey: pkey}
	if hw, err := net.ParseMAC(strings.TrimSpace(mac)); err == nil {
		switch {
		case plugin == TypeIBSriov && len(hw) == 8:
			ib.GUID = hw.String()
		case plugin == TypeIPoIB && len(hw) == 20: // flags+QPN (4 bytes), GID: subnet prefix (8), port GUID (8)
			ib.GUID = hw[12:].String()
		}
	}
	return ib
}

// ibPlugin finds the first ib-sriov or ipoib plugin of conf and its PKey.
func ibPlugin(conf []byte) (plugin, pkey string, ok bool) {
	type plug struct {
		Type string          `json:"type"`
		PKey json.RawMessage `json:"pkey"`
	}
	var list struct {
		plug
		Plugins []plug `json:"plugins"`
	}
	if err := json.Unmarshal(conf, &list); err != nil {
		return "", "", false
	}
	for _, p := range append([]plug{list.plug}, list.Plugins...) {
		if p.Type == TypeIBSriov || p.Type == TypeIPoIB {
			return p.Type, formatPKey(p.PKey), true
		}
	}
	return "", "", false
}

// formatPKey writes a configured PKey ("0x8005", "8005" or a JSON number)
// as 0x%04x, as ib-sriov normalises it; "" when absent or unreadable (the
// plugin itself refuses an unreadable one).
func formatPKey(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var v uint64
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		t := strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(s), "0x"), "0X")
		x, err := strconv.ParseUint(t, 16, 16)
		if err != nil {
			return ""
		}
		v = x
	} else if err := json.Unmarshal(raw, &v); err != nil || v > 0xffff {
		return ""
	}
	return fmt.Sprintf("0x%04x", v)
}

// ClaimData is the Data of a ResourceClaim's AllocatedDeviceStatus for an
// InfiniBand attachment: {"infiniband": {"guid": ..., "pkey": ..., "plugin": ...}}.
// nil for nil.
func ClaimData(ib *InfiniBand) *runtime.RawExtension {
	if ib == nil {
		return nil
	}
	b, _ := json.Marshal(struct {
		InfiniBand *InfiniBand `json:"infiniband"`
	}{ib}) // a struct of strings always marshals
	return &runtime.RawExtension{Raw: b}
}

// ParseNetworkStatus reads a network-status annotation with the extension.
func ParseNetworkStatus(annotation string) ([]NetworkStatus, error) {
	var out []NetworkStatus
	if err := json.Unmarshal([]byte(annotation), &out); err != nil {
		return nil, fmt.Errorf("network-status annotation is not a JSON list of entries: %w", err)
	}
	return out, nil
}

// PodGUID is what a pod's network-status says about one of its own GUIDs.
type PodGUID struct {
	PKey    string // "" when the network has none
	Network string // the entry's name: <namespace>/<NAD>
}

// PodGUIDs returns the pod's own GUIDs (ib-sriov attachments) in a
// network-status annotation with their PKeys and networks, keyed by the
// GUID in `ip link` form. An unreadable annotation gives none.
func PodGUIDs(annotation string) map[string]PodGUID {
	sts, err := ParseNetworkStatus(annotation)
	if err != nil {
		return nil
	}
	var out map[string]PodGUID
	for _, s := range sts {
		if ib := s.InfiniBand; ib != nil && ib.Plugin == TypeIBSriov && ib.GUID != "" {
			if out == nil {
				out = map[string]PodGUID{}
			}
			out[ib.GUID] = PodGUID{PKey: ib.PKey, Network: s.Name}
		}
	}
	return out
}
