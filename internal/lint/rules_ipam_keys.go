package lint

import (
	"fmt"

	"github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/internal/manifest"
)

// RDMA044: keys of an rdmanet-ipam/whereabouts ipam section that neither
// rdmanet-ipam nor Whereabouts knows (the plugin warns about the same keys
// in its CNI log at every ADD). Called from checkClusterIPAM.
func (c *checker) checkIPAMKeys(n *manifest.NAD, p manifest.CNIPlugin, field string) {
	cfg := p.IPAM()
	typ, _ := cfg["type"].(string)
	for _, u := range ipam.UnknownKeys(cfg) {
		f := field
		if !n.Generated {
			f = field + "." + u.Path
		}
		msg := fmt.Sprintf("%s: %s ipam key %q is unknown to rdmanet-ipam and Whereabouts and is ignored", n.Ref(), typ, u.Path)
		fix := fmt.Sprintf("remove %q, or rename it to the field it was meant to be", u.Key)
		if u.Suggestion != "" {
			msg += fmt.Sprintf("; did you mean %q?", u.Suggestion)
			fix = fmt.Sprintf("rename %q to %q", u.Key, u.Suggestion)
		}
		c.add("RDMA044", n.Obj, f, msg, fix)
	}
}
