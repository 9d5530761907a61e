package sim

// Preflight: the plugin binaries the demo needs (RequiredBinaries, test-switch builds) and the checks before Run or Soak.

import (
	"debug/buildinfo"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rdmanet/rdmanet/internal/netops"
)

// RequiredBinaries are the plugins the demo execs (from BinDir).
// ib-sriov and ipoib (the InfiniBand modes) run each call in their own
// process: they have no -direct sibling.
var RequiredBinaries = []string{"rdmanet", "rdmanet-direct", "sriov", "sriov-direct", "rdma", "rdma-direct", "rdmanet-ipam", "rdmanet-ipam-direct", "macvlan", "bridge", "host-local",
	"ib-sriov", "ipoib"}

// PrereqError means the machine cannot run the demo (no root, no network
// namespaces, binaries missing); the CLI exits 2.
type PrereqError struct{ Err error }

func (e *PrereqError) Error() string { return e.Err.Error() }
func (e *PrereqError) Unwrap() error { return e.Err }

// CheckBinaries tells which plugin binaries are missing from dir, or are
// production builds that refuse the recording fake (TestHooksBinaries).
func CheckBinaries(dir string) error {
	var missing []string
	for _, b := range RequiredBinaries {
		if st, err := os.Stat(filepath.Join(dir, b)); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("plugin binaries missing from %s: %s; fix: `make demo-bin` (builds them into bin/testhooks/) or point --bin-dir at them", dir, strings.Join(missing, ", "))
	}
	var prod []string
	for _, b := range TestHooksBinaries {
		if why := testHooksBuild(filepath.Join(dir, b)); why != "" {
			prod = append(prod, b+" ("+why+")")
		}
	}
	if len(prod) > 0 {
		return fmt.Errorf("plugin binaries in %s are not test-switch builds: %s; the demo's simulated VFs need RDMANET_NETOPS=record (the recording fake for SR-IOV and RDMA, which this machine lacks), "+
			"and production builds refuse it; fix: `make demo-bin` (builds them with -tags %s into bin/testhooks/) or point --bin-dir at such a build",
			dir, strings.Join(prod, ", "), netops.TestHooksTag)
	}
	return nil
}

// TestHooksBinaries are the plugin binaries the demo drives through the test
// switches (RDMANET_NETOPS=record), so they must be -tags rdmanet_testhooks
// builds.
var TestHooksBinaries = []string{"sriov-direct", "rdma-direct", "ib-sriov", "ipoib"}

// testHooksBuild is "" when the Go binary at path was built with the
// test-switch tag, else why not.
func testHooksBuild(path string) string {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return "no Go build info: " + err.Error()
	}
	for _, s := range bi.Settings {
		if s.Key == "-tags" && slices.Contains(strings.Split(s.Value, ","), netops.TestHooksTag) {
			return ""
		}
	}
	return "built without -tags " + netops.TestHooksTag
}

// preflight checks the machine (CheckPrereqs) and the binaries in binDir
// (CheckBinaries), and returns binDir made absolute.
func preflight(binDir string) (string, error) {
	if err := CheckPrereqs(); err != nil {
		return "", &PrereqError{Err: err}
	}
	abs, err := filepath.Abs(binDir)
	if err != nil {
		return "", err
	}
	if err := CheckBinaries(abs); err != nil {
		return "", &PrereqError{Err: err}
	}
	return abs, nil
}
