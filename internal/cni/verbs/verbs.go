// Package verbs is the shape rdmanet's own plugin binaries (sriov, rdma,
// ib-sriov, ipoib) share: their cmd.go skeleton (Cmd: one function per CNI
// verb, run either by skel in the binary or in-process by the daemon,
// internal/daemon/inproc, producing the same bytes; RunFromEnv); the
// plugin built from the environment (FromEnv); the IPAM steps (IPAM,
// ExecIPAM, AddIPAM, DelIPAM, CheckIPAM); and the ADD, DEL and CHECK steps
// of the plugins that keep a record per device (AddRecorded with its
// rollback, RecordDel, CheckRecord, RDMABack).
package verbs

import (
	"bytes"
	"fmt"
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
)

// Verbs are a plugin's CNI verbs.
type Verbs struct {
	Add   func(*skel.CmdArgs) (types.Result, error)
	Del   func(*skel.CmdArgs) error
	Check func(*skel.CmdArgs) error
	// CNIVersion is the version ADD's result is printed in (the config's).
	CNIVersion func(stdin []byte) string
}

// Run runs cmd and returns what the binary prints on stdout: ADD's result
// in the config's cniVersion, nothing for DEL and CHECK. The checks skel
// makes before a verb (environment, config version) are the caller's.
func (v Verbs) Run(cmd string, a *skel.CmdArgs) ([]byte, error) {
	switch cmd {
	case "ADD":
		res, err := v.Add(a)
		if err != nil {
			return nil, err
		}
		r, err := res.GetAsVersion(v.CNIVersion(a.StdinData))
		if err != nil {
			return nil, err
		}
		var b bytes.Buffer
		if err := r.PrintTo(&b); err != nil { // the bytes types.PrintResult writes
			return nil, err
		}
		return b.Bytes(), nil
	case "DEL":
		return nil, v.Del(a)
	case "CHECK":
		return nil, v.Check(a)
	}
	return nil, types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("unknown CNI_COMMAND: %v", cmd), "")
}

// Skel adapts run (or the error that kept the plugin from being built) to
// skel for the binary: the output goes to stdout.
func Skel(run func(cmd string, a *skel.CmdArgs) ([]byte, error), buildErr error) skel.CNIFuncs {
	verb := func(cmd string) func(*skel.CmdArgs) error {
		return func(a *skel.CmdArgs) error {
			if buildErr != nil {
				return buildErr
			}
			out, err := run(cmd, a)
			if err != nil {
				return err
			}
			_, err = os.Stdout.Write(out)
			return err
		}
	}
	return skel.CNIFuncs{Add: verb("ADD"), Del: verb("DEL"), Check: verb("CHECK")}
}
