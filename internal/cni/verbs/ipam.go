package verbs

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ipam"
	"github.com/containernetworking/plugins/pkg/ns"
)

// ApplyIPAM takes the answer r of the IPAM plugin named plugin into result
// (its addresses, on the result's first interface, its routes and DNS) and
// configures them on ifName in podNS. An answer without an address is an
// error that says where to look.
func ApplyIPAM(plugin string, r types.Result, result *current.Result, podNS ns.NetNS, ifName string) error {
	ipRes, err := current.NewResultFromResult(r)
	if err != nil {
		return fmt.Errorf("IPAM plugin %q result: %w", plugin, err)
	}
	if len(ipRes.IPs) == 0 {
		return fmt.Errorf("IPAM plugin %q returned no IP address; check its range/exclude settings", plugin)
	}
	for _, ipc := range ipRes.IPs {
		ipc.Interface = current.Int(0)
	}
	result.IPs, result.Routes, result.DNS = ipRes.IPs, ipRes.Routes, ipRes.DNS
	if err := podNS.Do(func(ns.NetNS) error { return ipam.ConfigureIface(ifName, result) }); err != nil {
		return fmt.Errorf("apply IPAM result to %s: %w", ifName, err)
	}
	return nil
}
