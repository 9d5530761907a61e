package lint

import (
	"regexp"
	"strings"
)

// ncclFilter is a parsed NCCL interface/device filter (NCCL_SOCKET_IFNAME,
// NCCL_IB_HCA): "^" excludes, "=" matches exactly, otherwise each entry is
// a prefix. Entries are comma-separated; ":port" suffixes (NCCL_IB_HCA) are
// dropped.
type ncclFilter struct {
	exclude bool
	exact   bool
	items   []string
}

func parseFilter(v string) ncclFilter {
	v = strings.TrimSpace(v)
	var f ncclFilter
	if strings.HasPrefix(v, "^") {
		f.exclude = true
		v = v[1:]
	}
	if strings.HasPrefix(v, "=") {
		f.exact = true
		v = v[1:]
	}
	for _, it := range strings.Split(v, ",") {
		it = strings.TrimSpace(it)
		if i := strings.IndexByte(it, ':'); i >= 0 {
			it = it[:i]
		}
		if it != "" {
			f.items = append(f.items, it)
		}
	}
	return f
}

func (f ncclFilter) selects(name string) bool {
	hit := false
	for _, it := range f.items {
		if (f.exact && name == it) || (!f.exact && strings.HasPrefix(name, it)) {
			hit = true
			break
		}
	}
	if f.exclude {
		return !hit
	}
	return hit
}

func selectsAny(spec string, names []string) bool { return len(matching(spec, names)) > 0 }

func matching(spec string, names []string) []string {
	f := parseFilter(spec)
	var out []string
	for _, n := range names {
		if f.selects(n) {
			out = append(out, n)
		}
	}
	return out
}

// hcaNameRE matches verbs device names (ibv_devices / ibdev2netdev left column).
var hcaNameRE = regexp.MustCompile(`^(mlx[45]_\d*|mlx[45]_?|bnxt_re\d*|irdma\d*|erdma_?\d*|hns_?\d*|qedr\d*|rxe\d*|siw\d*|rocep\w*|efa_?\d*)$`)

// netdevNameRE matches common network interface names that are never verbs
// device names (ib* is left out: udev names IB verbs devices ibpXsY too).
var netdevNameRE = regexp.MustCompile(`^(eth\d*|net\d*|en[ospx]\w*|eno\d*|bond\d*|lo)$`)

// FilterSelects reports whether an NCCL interface/device filter
// (NCCL_SOCKET_IFNAME or NCCL_IB_HCA syntax: "^" excludes, "=" exact,
// otherwise prefixes, comma-separated, ":port" ignored) selects name.
// Exported for `kubectl rdma doctor`, which checks the filters against the
// interfaces and devices a node or pod really has.
func FilterSelects(filter, name string) bool { return parseFilter(filter).selects(name) }

// IsVerbsDeviceName tells whether name looks like an RDMA (verbs) device
// name such as mlx5_0, rather than a network interface.
func IsVerbsDeviceName(name string) bool { return hcaNameRE.MatchString(name) }
