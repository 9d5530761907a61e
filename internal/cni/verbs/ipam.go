package verbs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/invoke"
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

// IPAM runs the IPAM plugin a config names: exec'd from CNI_PATH as
// plugins do (ExecIPAM), or delegated in-process by the daemon with the
// call's environment.
type IPAM interface {
	Add(plugin string, stdin []byte) (types.Result, error)
	Check(plugin string, stdin []byte) error
	Del(plugin string, stdin []byte) error
}

// RecordIPAM is the IPAM of a plugin that keeps a record per device
// (sriov, ib-sriov).
type RecordIPAM interface {
	IPAM
	// DelFor is Del of the attachment of another container and interface
	// than the call's: a teardown finished for an earlier sandbox.
	DelFor(plugin string, stdin []byte, containerID, ifName string) error
}

// ExecIPAM execs the IPAM plugin from CNI_PATH, as plugins do.
type ExecIPAM struct{}

func (ExecIPAM) Add(p string, b []byte) (types.Result, error) { return ipam.ExecAdd(p, b) }
func (ExecIPAM) Check(p string, b []byte) error               { return ipam.ExecCheck(p, b) }
func (ExecIPAM) Del(p string, b []byte) error                 { return ipam.ExecDel(p, b) }

// DelFor execs the IPAM plugin's DEL with CNI_CONTAINERID and CNI_IFNAME of
// the given attachment (the rest of the environment as the call's).
func (ExecIPAM) DelFor(p string, b []byte, containerID, ifName string) error {
	path, err := invoke.FindInPath(p, filepath.SplitList(os.Getenv("CNI_PATH")))
	if err != nil {
		return err
	}
	args := &invoke.Args{Command: "DEL", ContainerID: containerID, IfName: ifName,
		PluginArgsStr: os.Getenv("CNI_ARGS"), Path: os.Getenv("CNI_PATH")}
	return invoke.ExecPluginWithoutResult(context.Background(), path, b, args, nil)
}

// DelIPAM runs the DEL of the IPAM plugin named typ ("" is none: nothing
// to do); its error names the plugin.
func DelIPAM(i IPAM, typ string, stdin []byte) error {
	if typ == "" {
		return nil
	}
	if err := i.Del(typ, stdin); err != nil {
		return fmt.Errorf("IPAM plugin %q DEL: %w", typ, err)
	}
	return nil
}

// CheckIPAM runs the CHECK of the IPAM plugin named typ ("" is none).
func CheckIPAM(i IPAM, typ string, stdin []byte) error {
	if typ == "" {
		return nil
	}
	if err := i.Check(typ, stdin); err != nil {
		return fmt.Errorf("IPAM plugin %q CHECK: %w", typ, err)
	}
	return nil
}

// DelIPAMFor is DelIPAM of a recorded attachment (containerID, ifName),
// which is not the call's when an ADD reclaims the device of a gone
// sandbox: with the call's config (stdin), else the one recorded.
func DelIPAMFor(i RecordIPAM, typ string, stdin, recorded []byte, containerID, ifName string) error {
	if typ == "" {
		return nil
	}
	if len(stdin) == 0 {
		stdin = recorded
	}
	if err := i.DelFor(typ, stdin, containerID, ifName); err != nil {
		return fmt.Errorf("IPAM plugin %q DEL: %w", typ, err)
	}
	return nil
}

// AddIPAM runs the ADD of the IPAM plugin named typ ("" is none) and
// applies its answer to ifName in podNS (ApplyIPAM); added, when set, runs
// between the two (it notes the allocation, or hits a failpoint).
func AddIPAM(i IPAM, typ string, stdin []byte, result *current.Result, podNS ns.NetNS, ifName string, added func() error) error {
	if typ == "" {
		return nil
	}
	r, err := i.Add(typ, stdin)
	if err != nil {
		return fmt.Errorf("IPAM plugin %q ADD: %w", typ, err)
	}
	if added != nil {
		if err := added(); err != nil {
			return err
		}
	}
	return ApplyIPAM(typ, r, result, podNS, ifName)
}
