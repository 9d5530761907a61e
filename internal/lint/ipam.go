package lint

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/internal/manifest"
)

// placeholderNodeConfig stands in for the node config file the agent writes
// on every node (it supplies the store); lint checks the network's own
// fields, not the node's store.
var placeholderNodeConfig = []byte(`{"store":{"type":"local","path":"/var/lib/rdmanet/ipam"}}`)

// parseClusterIPAM validates an rdmanet-ipam or whereabouts ipam section with
// rdmanet-ipam's own parser. It returns the ranges' CIDRs, or the config
// error (store-related errors are ignored: the node config supplies the store).
func parseClusterIPAM(netName string, ipamCfg map[string]any) ([]*net.IPNet, *ipam.ConfigError) {
	cp := map[string]any{}
	for k, v := range ipamCfg {
		switch k {
		case "store", "datastore", "kubernetes", "configuration_path":
			continue // node-level: supplied by the node config file
		}
		cp[k] = v
	}
	conf, err := json.Marshal(map[string]any{"cniVersion": "0.3.1", "name": netName, "ipam": cp})
	if err != nil {
		return nil, nil
	}
	cfg, err := ipam.Parse(conf, ipam.Env{NodeConfig: placeholderNodeConfig})
	if err != nil {
		var ce *ipam.ConfigError
		if errors.As(err, &ce) && !strings.HasPrefix(ce.Field, "store") && ce.Field != "datastore" {
			return nil, ce
		}
		return nil, nil
	}
	var out []*net.IPNet
	for _, r := range cfg.Ranges {
		if _, ipn, err := net.ParseCIDR(r.Prefix.String()); err == nil {
			out = append(out, ipn)
		}
	}
	return out, nil
}

// ipamCIDRs returns the address ranges of an ipam section (any type).
func ipamCIDRs(netName string, ipamCfg map[string]any) []*net.IPNet {
	typ, _ := ipamCfg["type"].(string)
	if typ == "rdmanet-ipam" || typ == "whereabouts" {
		nets, _ := parseClusterIPAM(netName, ipamCfg)
		return nets
	}
	var out []*net.IPNet
	for _, k := range []string{"range", "subnet"} {
		if s, ok := ipamCfg[k].(string); ok {
			if _, ipn, err := net.ParseCIDR(s); err == nil {
				out = append(out, ipn)
			}
		}
	}
	return out
}

// RDMA042
func (c *checker) checkClusterIPAM(n *manifest.NAD, p manifest.CNIPlugin, field string) {
	cfg := p.IPAM()
	typ, _ := cfg["type"].(string)
	if typ != "rdmanet-ipam" && typ != "whereabouts" {
		return
	}
	c.checkIPAMKeys(n, p, field) // RDMA044
	name := n.Name
	if n.Config != nil && n.Config.Name != "" {
		name = n.Config.Name
	}
	_, ce := parseClusterIPAM(name, cfg)
	if ce == nil {
		return
	}
	f := field
	if ce.Field != "" && !n.Generated {
		f = field + "." + ce.Field
	}
	msg := fmt.Sprintf("%s: %s ipam rejected by rdmanet-ipam: ", n.Ref(), typ)
	if ce.Field != "" {
		msg += fmt.Sprintf("field %q", ce.Field)
		if ce.Value != "" {
			msg += fmt.Sprintf(" = %q", ce.Value)
		}
		msg += ": "
	}
	msg += ce.Rule
	if ce.Err != nil {
		msg += ": " + ce.Err.Error()
	}
	c.add("RDMA042", n.Obj, f, msg, ce.Fix)
}
