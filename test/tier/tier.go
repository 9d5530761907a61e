// Package tier decides what a test of a tier that needs something a machine
// may lack (root, network namespaces, a mount namespace) does when it cannot
// run: on a developer's machine it skips with the reason; where the tier is
// required — CI (CI=true, set by .ci/run) or RDMANET_REQUIRE_NETNS=1 — it
// fails, so a required tier never vanishes from a run as a skip.
//
// It depends on nothing but the standard library, so every test module
// (test/kubelet too) can use it.
package tier

import (
	"os"
	"testing"
)

// EnvRequire makes the root-only tiers required outside CI too.
const EnvRequire = "RDMANET_REQUIRE_NETNS"

// Required returns why the root-only tiers must run here ("CI=true",
// "RDMANET_REQUIRE_NETNS=1"), or "" when they may skip. getenv nil means
// os.Getenv.
func Required(getenv func(string) string) string {
	if getenv == nil {
		getenv = os.Getenv
	}
	switch {
	case getenv(EnvRequire) == "1":
		return EnvRequire + "=1"
	case getenv("CI") == "true":
		return "CI=true"
	}
	return ""
}

// Unavailable ends t because the tier named name cannot run here, for
// reason: it fails t where the tier is required (Required), else skips it.
func Unavailable(t testing.TB, name, reason string) {
	t.Helper()
	if why := Required(nil); why != "" {
		t.Fatalf("%s tier cannot run: %s (%s: a required tier must not skip)", name, reason, why)
	}
	t.Skipf("%s tier skipped: %s (it fails instead with CI=true or %s=1)", name, reason, EnvRequire)
}
