package install

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/rdmanet/rdmanet/internal/version/inspect"
)

// Fallbacks maps each thin CNI binary rdmanet installs to the -direct
// binary it becomes (exec) when no rdmanet-daemon answers; the thin binary
// finds it next to itself or on CNI_PATH.
var Fallbacks = map[string]string{
	"rdmanet":  "rdmanet-direct",
	"sriov":    "sriov-direct",
	"rdma":     "rdma-direct",
	IPAMBinary: "rdmanet-ipam-direct",
}

// MissingFallback is a thin rdmanet binary in a CNI bin directory whose
// -direct binary is not there: while the node's daemon is down, or
// declines (another build), every call of it fails.
type MissingFallback struct {
	Binary string // file name in the directory (whereabouts for rdmanet-ipam installed so)
	Direct string // the missing -direct binary
}

// doesOwnWork tells an rdmanet plugin built before it was split into a
// thin forwarder and a -direct binary: that build did the work itself and
// links the netlink library (sriov, rdma) or the API client (rdmanet-ipam),
// which the thin binaries never link (test/depcheck.ThinPlugin).
func doesOwnWork(b inspect.Binary) bool {
	return b.Links("github.com/vishvananda/netlink") || b.Links("k8s.io/client-go")
}

// MissingFallbacks lists rdmanet's thin binaries in binDir (rdmanet-ipam
// also under the name whereabouts) whose -direct binary is missing from
// binDir, in name order. Files that are not rdmanet's, and rdmanet builds
// from before the split, need none.
func MissingFallbacks(binDir string) ([]MissingFallback, error) {
	names := []string{Whereabouts}
	for thin := range Fallbacks {
		names = append(names, thin)
	}
	slices.Sort(names)
	var out []MissingFallback
	for _, name := range names {
		p := filepath.Join(binDir, name)
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		b, err := inspect.File(p)
		if err != nil {
			continue // not a Go binary: not rdmanet's
		}
		cmd := name
		if name == Whereabouts {
			cmd = IPAMBinary
		}
		if !b.Is(cmd) || doesOwnWork(b) {
			continue
		}
		direct := Fallbacks[cmd]
		if _, err := os.Stat(filepath.Join(binDir, direct)); errors.Is(err, fs.ErrNotExist) {
			out = append(out, MissingFallback{Binary: name, Direct: direct})
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(binDir, direct), err)
		}
	}
	return out, nil
}
