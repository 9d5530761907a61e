package netops

import (
	"errors"
	"fmt"
	"testing"
)

// TestHooksTag is the Go build tag that turns on the test switches of the
// plugin processes: RDMANET_NETOPS=record (the recording fake instead of the
// kernel for VF configuration and RDMA moves) and RDMANET_CNI_FAULT
// (failpoints). Shipped binaries are built without it; the tests' plugin
// builds (test/pluginbin), the demo (`make demo`, bin/testhooks/) and the
// simulated-node image are built with it.
const TestHooksTag = "rdmanet_testhooks"

// TestHooks reports whether this process honours the test switches: it was
// built with -tags rdmanet_testhooks, or it is a `go test` binary (never
// shipped; tests that run plugins in-process need the switches there too).
func TestHooks() bool { return builtWithTestHooks || testing.Testing() }

// ErrTestSwitch is wrapped when a production build refuses a test switch.
var ErrTestSwitch = errors.New("test switch in a production build")

// testSwitchError is the refusal of RDMANET_NETOPS=record in a production build.
func testSwitchError(name, value string) error {
	return fmt.Errorf("%s=%s: %w: this binary was built without -tags %s, so it never swaps the kernel for the recording fake; "+
		"refusing instead of pretending to configure the VF (or configuring a real one the caller meant to simulate); "+
		"fix: on a node, remove %s from the plugin's environment (the CNI config needs no switch); "+
		"for tests and the demo, use a build with -tags %s (test/pluginbin, `make demo` → bin/testhooks/)",
		name, value, ErrTestSwitch, TestHooksTag, name, TestHooksTag)
}
