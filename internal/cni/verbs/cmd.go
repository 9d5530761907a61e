package verbs

import (
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/rdmanet/rdmanet/internal/cni/confkeys"
)

// Config is what Cmd reads of a plugin's parsed config.
type Config interface {
	// Header is the config's cniVersion and network name.
	Header() (cniVersion, network string)
}

// Cmd is the cmd.go skeleton of rdmanet's plugins (sriov, rdma, ib-sriov,
// ipoib): their verbs (R is what the plugin's ADD returns), and their
// config read by ParseLoose (C is the plugin's *Config).
type Cmd[C Config, R types.Result] struct {
	Add   func(*skel.CmdArgs) (R, error)
	Del   func(*skel.CmdArgs) error
	Check func(*skel.CmdArgs) error
	// ParseLoose parses a config without ADD's requirements.
	ParseLoose func(stdin []byte) (C, error)
	// UnknownKeys, when set, lists the keys of an ADD's config the plugin
	// does not read; each is warned of through Warnf (nil is Stderr) before
	// the ADD runs, with KeysDoc (WarnUnknownKeys).
	UnknownKeys func(stdin []byte) []confkeys.Finding
	KeysDoc     string
	Warnf       func(format string, args ...any)
}

// Run runs one CNI verb and returns what the binary prints on stdout: ADD's
// result in the config's cniVersion, nothing for DEL and CHECK (Verbs.Run).
func (c Cmd[C, R]) Run(cmd string, a *skel.CmdArgs) ([]byte, error) {
	if cmd == "ADD" && c.UnknownKeys != nil {
		warnf := c.Warnf
		if warnf == nil {
			warnf = Stderr
		}
		_, network := c.header(a.StdinData)
		WarnUnknownKeys(warnf, a, network, c.UnknownKeys(a.StdinData), c.KeysDoc)
	}
	return Verbs{
		Add:        func(a *skel.CmdArgs) (types.Result, error) { return c.Add(a) },
		Del:        c.Del,
		Check:      c.Check,
		CNIVersion: func(stdin []byte) string { v, _ := c.header(stdin); return v },
	}.Run(cmd, a)
}

// header is the config's cniVersion and network name ("" each when it does
// not parse).
func (c Cmd[C, R]) header(stdin []byte) (cniVersion, network string) {
	conf, err := c.ParseLoose(stdin)
	if err != nil {
		return "", ""
	}
	return conf.Header()
}

// Runner is a plugin built for one call.
type Runner interface {
	Run(cmd string, a *skel.CmdArgs) ([]byte, error)
}

// RunFromEnv is the package-level Run of a plugin, for the daemon's
// in-process calls: it builds the plugin from the call's environment
// getenv (fromEnv: the plugin's FromEnv), lets set adjust it (nil: none;
// e.g. the daemon's IPAM delegate) and runs cmd on it.
func RunFromEnv[P Runner](fromEnv func(getenv func(string) string) (P, error), getenv func(string) string, set func(P), cmd string, a *skel.CmdArgs) ([]byte, error) {
	p, err := fromEnv(getenv)
	if err != nil {
		return nil, err
	}
	if set != nil {
		set(p)
	}
	return p.Run(cmd, a)
}

// Or is v, or def when v is nil (e.g. an IPAM the caller did not pass).
func Or[T any](v, def T) T {
	if any(v) == nil {
		return def
	}
	return v
}
