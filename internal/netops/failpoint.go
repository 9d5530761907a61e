package netops

import (
	"fmt"
	"os"
	"strings"
)

// EnvFault names a failpoint for crash-consistency tests:
//
//	RDMANET_CNI_FAULT=<plugin>:<step>[:exit]
//
// makes <plugin> fail right after <step> of ADD: by returning an error (its
// rollback runs), or with ":exit" by dying on the spot (exit status 137, as
// SIGKILL would), leaving whatever it had done for DEL to clean up. Never set
// it on a node.
const EnvFault = "RDMANET_CNI_FAULT"

// Failpoint is a parsed RDMANET_CNI_FAULT for one plugin.
type Failpoint struct {
	Step string
	Exit bool
}

// FailpointFromEnv returns the failpoint addressed to plugin, nil when none
// or in a production build.
func FailpointFromEnv(getenv func(string) string, plugin string) *Failpoint {
	if getenv == nil {
		getenv = os.Getenv
	}
	return failpointFromEnv(getenv, plugin, TestHooks())
}

func failpointFromEnv(getenv func(string) string, plugin string, hooks bool) *Failpoint {
	if !hooks {
		return nil
	}
	v := getenv(EnvFault)
	parts := strings.Split(v, ":")
	if v == "" || len(parts) < 2 || parts[0] != plugin {
		return nil
	}
	return &Failpoint{Step: parts[1], Exit: len(parts) > 2 && parts[2] == "exit"}
}

// Hit is called after each step; it fails or exits when the step matches.
func (f *Failpoint) Hit(step string) error {
	if f == nil || f.Step != step {
		return nil
	}
	if f.Exit {
		os.Exit(137)
	}
	return fmt.Errorf("injected fault after step %q (%s)", step, EnvFault)
}
