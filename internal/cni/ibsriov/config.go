// Package ibsriov implements the `ib-sriov` CNI plugin: a drop-in for
// ib-sriov-cni (same type and config) that gives a pod an InfiniBand VF with
// a node/port GUID set through the PF (from the pod's request, or rdmanet's
// cluster-wide GUID pool), its link state, its IPoIB netdev (when it has
// one) and its RDMA device, and restores the VF's GUID and state on DEL.
// IB-only functions (an RDMA device, no netdev) are served without a netdev.
//
// Config parsing (this file) is pure; the verbs (ibsriov.go) run over
// injected netops, a sysfs root, a state dir and the GUID pool.
package ibsriov

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/rdmanet/rdmanet/internal/cni/cniconf"
	"github.com/rdmanet/rdmanet/internal/guidpool"
	"github.com/rdmanet/rdmanet/internal/inventory"
)

// Validation errors; every error from Parse wraps one in a *ConfigError.
var (
	ErrMissingDeviceID = cniconf.ErrMissingDeviceID
	ErrBadDeviceID     = cniconf.ErrBadDeviceID
	ErrBadGUID         = errors.New("invalid GUID")
	ErrBadPKey         = cniconf.ErrBadPKey
	ErrBadLinkState    = cniconf.ErrBadLinkState
	ErrBadJSON         = cniconf.ErrBadJSON
	ErrVfio            = errors.New("vfio-pci mode not supported")
	ErrIBKubernetes    = errors.New("ib-kubernetes has not configured the pod")
)

// ConfigError names the field, the value, the rule and the fix.
type ConfigError = cniconf.Error

func cfgErr(err error, field, value, rule, fix string) error {
	return cniconf.Refuse("ib-sriov", err, field, value, rule, fix)
}

// IBKubernetesAnnotation is the CNI arg ib-kubernetes sets to "configured"
// once the pod's GUID is in its PKey (ib-sriov-cni's check, kept).
const (
	IBKubernetesAnnotation = "mellanox.infiniband.app"
	IBKubernetesConfigured = "configured"
)

// NetConf is ib-sriov-cni's config schema, field for field.
type NetConf struct {
	types.NetConf
	DeviceID            string `json:"deviceID,omitempty"`
	Master              string `json:"master,omitempty"` // accepted; the PF is found from deviceID
	PKey                string `json:"pkey,omitempty"`
	LinkState           string `json:"link_state,omitempty"`
	RdmaIsolation       bool   `json:"rdmaIsolation,omitempty"`
	IBKubernetesEnabled bool   `json:"ibKubernetesEnabled,omitempty"`
	VfioPciMode         bool   `json:"vfioPciMode,omitempty"`
	LogLevel            string `json:"logLevel,omitempty"`
	LogFile             string `json:"logFile,omitempty"`
	RuntimeConfig       struct {
		InfinibandGUID string `json:"infinibandGUID,omitempty"`
		DeviceID       string `json:"deviceID,omitempty"`
	} `json:"runtimeConfig,omitempty"`
	Args struct {
		CNI map[string]string `json:"cni"`
	} `json:"args"`
}

// Config is the validated configuration.
type Config struct {
	CNIVersion string `json:"cniVersion"`
	Name       string `json:"name"`
	IPAMType   string `json:"ipamType,omitempty"`
	DeviceID   string `json:"deviceID"`
	// GUID the pod asked for (runtimeConfig infinibandGUID, else args.cni.guid); 0 when none.
	GUID guidpool.GUID `json:"guid,omitempty"`
	// PKey as configured (normalised 0x%04x), "" when none.
	PKey                string `json:"pkey,omitempty"`
	LinkState           string `json:"linkState,omitempty"`
	RdmaIsolation       bool   `json:"rdmaIsolation,omitempty"`
	IBKubernetesEnabled bool   `json:"ibKubernetesEnabled,omitempty"`
	// IBKubernetesConfigured is args.cni[mellanox.infiniband.app] == configured.
	IBKubernetesConfigured bool `json:"ibKubernetesConfigured,omitempty"`
}

// Parse decodes and validates an ib-sriov config; a deviceID is required.
func Parse(stdin []byte) (*Config, error) {
	c, err := parse(stdin)
	if err != nil {
		return nil, err
	}
	if c.DeviceID == "" {
		return nil, cfgErr(ErrMissingDeviceID, "deviceID", `""`, "ib-sriov needs the PCI address of the VF allocated to the pod",
			"the NAD's k8s.v1.cni.cncf.io/resourceName must match the device plugin pool and the pod's resource request, so the meta plugin injects the allocated VF")
	}
	return c, nil
}

// ParseLoose is Parse without the deviceID requirement (DEL, CHECK).
func ParseLoose(stdin []byte) (*Config, error) { return parse(stdin) }

func parse(stdin []byte) (*Config, error) {
	var n NetConf
	if err := cniconf.Decode("ib-sriov", stdin, &n); err != nil {
		return nil, err
	}
	c := &Config{CNIVersion: n.CNIVersion, Name: n.Name, IPAMType: n.IPAM.Type, RdmaIsolation: n.RdmaIsolation,
		IBKubernetesEnabled: n.IBKubernetesEnabled, IBKubernetesConfigured: n.Args.CNI[IBKubernetesAnnotation] == IBKubernetesConfigured}
	if n.VfioPciMode {
		return nil, cfgErr(ErrVfio, "vfioPciMode", "true", "rdmanet's ib-sriov serves kernel-driver VFs and IB-only functions, not VFIO passthrough",
			"drop vfioPciMode and bind the VF to mlx5_core, or keep ib-sriov-cni for VFIO (KubeVirt) networks")
	}
	var err error
	if c.DeviceID, err = cniconf.Device("ib-sriov", n.DeviceID, n.RuntimeConfig.DeviceID); err != nil {
		return nil, err
	}
	g, field := n.RuntimeConfig.InfinibandGUID, "runtimeConfig.infinibandGUID"
	if g == "" {
		g, field = n.Args.CNI["guid"], "args.cni.guid"
	}
	if g != "" {
		v, err := guidpool.ParseGUID(g)
		if err != nil || v == guidpool.Zero || v == guidpool.AllOnes {
			return nil, cfgErr(ErrBadGUID, field, strconv.Quote(g), "must be an assignable 8-byte GUID (not all zeros or all ones), e.g. 02:00:00:00:00:00:00:01",
				`correct "infiniband-guid" in the pod's k8s.v1.cni.cncf.io/networks annotation, or drop it to take one from the GUID pool`)
		}
		c.GUID = v
	}
	if n.PKey != "" {
		p, err := ParsePKey(n.PKey)
		if err != nil {
			return nil, cfgErr(ErrBadPKey, "pkey", strconv.Quote(n.PKey), err.Error(), `write the partition key in hex, e.g. "0x8005" (full member) or "0x5"`)
		}
		c.PKey = fmt.Sprintf("0x%04x", p)
	}
	switch n.LinkState {
	case "", "auto", "enable", "disable":
		c.LinkState = n.LinkState
	default:
		return nil, cfgErr(ErrBadLinkState, "link_state", strconv.Quote(n.LinkState), `must be "auto", "enable" or "disable"`, `use "enable", or drop the field`)
	}
	return c, nil
}

// ParsePKey reads a partition key: hex with or without 0x, 15 bits plus the
// membership bit; 0x0000 and 0x8000 (the invalid PKey) are refused.
func ParsePKey(s string) (uint16, error) {
	k, err := inventory.ParsePKey(s)
	if err != nil {
		return 0, err
	}
	return k, inventory.CheckPKeyPartition(k)
}
