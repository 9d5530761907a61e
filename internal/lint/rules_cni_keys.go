package lint

import (
	"fmt"
	"sort"

	"github.com/rdmanet/rdmanet/internal/cni/confkeys"
	"github.com/rdmanet/rdmanet/internal/manifest"
)

// RDMA029: keys of a NAD's sriov or rdma plugin config that the plugin
// does not read (the plugins warn about the same keys in the CNI log at
// every ADD; both use confkeys). Configs that lint generates from a
// SriovNetwork or SpiderMultusConfig are not checked: their keys are the
// generator's, not the user's. Called from checkNADs for every plugin.
func (c *checker) checkCNIKeys(n *manifest.NAD, p manifest.CNIPlugin, field func(int, string) string) {
	if n.Generated {
		return
	}
	var cat confkeys.Catalogue
	switch p.Type {
	case "sriov":
		cat = confkeys.SRIOV
	case "rdma":
		cat = confkeys.RDMA
	case "ipoib":
		cat = confkeys.IPoIB
	default:
		return
	}
	keys := make([]string, 0, len(p.Raw))
	for k := range p.Raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, f := range cat.Check(keys) {
		var msg, fix string
		switch {
		case f.Ignored != "":
			msg = fmt.Sprintf("%s: the %s plugin accepts %q but it has no effect: %s", n.Ref(), p.Type, f.Key, f.Ignored)
			fix = fmt.Sprintf("remove %q", f.Key)
		case f.Hint != "":
			msg = fmt.Sprintf("%s: the %s plugin does not read %q and ignores it; did you mean %q?", n.Ref(), p.Type, f.Key, f.Hint)
			fix = fmt.Sprintf("rename %q to %q", f.Key, f.Hint)
		default:
			msg = fmt.Sprintf("%s: the %s plugin does not read %q and ignores it", n.Ref(), p.Type, f.Key)
			fix = fmt.Sprintf("remove %q, or rename it to the field it was meant to be (docs/cni.md lists them)", f.Key)
		}
		c.add("RDMA029", n.Obj, field(p.Index, f.Key), msg, fix)
	}
}
