package rdma

import (
	"bytes"
	"fmt"
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/internal/sysfs"
)

// Versions are the CNI spec versions the plugin speaks.
var Versions = version.PluginSupports("0.3.1", "0.4.0", "1.0.0", "1.1.0")

// About is the plugin's description.
const About = "rdma CNI plugin (rdmanet): moves a VF's RDMA device into the pod netns (exclusive mode)"

// FromEnv builds the plugin from the process environment.
func FromEnv(getenv func(string) string) (*Plugin, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	ops, err := netops.FromEnv(getenv)
	if err != nil {
		return nil, err
	}
	dir := netops.PluginStateDir(getenv, "rdma", DefaultStateDir)
	return &Plugin{Sysfs: sysfs.New(getenv(netops.EnvSysfsRoot)), RDMA: ops.RDMA, StateDir: dir, Fault: netops.FailpointFromEnv(getenv, "rdma")}, nil
}

// Funcs adapts the plugin (or the error building it) to skel.
func Funcs(p *Plugin, buildErr error) skel.CNIFuncs {
	verb := func(cmd string) func(*skel.CmdArgs) error {
		return func(a *skel.CmdArgs) error {
			if buildErr != nil {
				return buildErr
			}
			out, err := p.Run(cmd, a)
			if err != nil {
				return err
			}
			_, err = os.Stdout.Write(out)
			return err
		}
	}
	return skel.CNIFuncs{Add: verb("ADD"), Del: verb("DEL"), Check: verb("CHECK")}
}

// Run runs one CNI verb (ADD, DEL or CHECK) of a plugin built from getenv
// and returns what the binary prints on stdout: ADD's result in the
// config's cniVersion, nothing for DEL and CHECK. The CNI_* checks skel
// does before a verb are the caller's.
func Run(cmd string, args *skel.CmdArgs, getenv func(string) string) ([]byte, error) {
	p, err := FromEnv(getenv)
	if err != nil {
		return nil, err
	}
	return p.Run(cmd, args)
}

// Run runs one CNI verb and returns what the binary prints on stdout.
func (p *Plugin) Run(cmd string, a *skel.CmdArgs) ([]byte, error) {
	switch cmd {
	case "ADD":
		res, err := p.Add(a)
		if err != nil {
			return nil, err
		}
		c, _ := ParseLoose(a.StdinData)
		r, err := res.GetAsVersion(c.CNIVersion)
		if err != nil {
			return nil, err
		}
		var b bytes.Buffer
		if err := r.PrintTo(&b); err != nil {
			return nil, err
		}
		return b.Bytes(), nil
	case "DEL":
		return nil, p.Del(a)
	case "CHECK":
		return nil, p.Check(a)
	}
	return nil, types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("unknown CNI_COMMAND: %v", cmd), "")
}
