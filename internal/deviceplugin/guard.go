package deviceplugin

import (
	"fmt"
	"strings"

	"github.com/rdmanet/rdmanet/internal/deviceplugin/config"
)

// Guard keeps the device plugin and another allocator of the same hardware
// (the DRA kubelet plugin, internal/dra) from handing one device out twice.
// The device plugin asks it which PCI functions the other side holds and
// tells it what kubelet's Allocate handed out. Implementations must be
// safe for concurrent use and must not block.
type Guard interface {
	// Holder names what holds a PCI function outside the device plugin
	// (e.g. `DRA claim ns/name (uid)`), "" when nothing does.
	Holder(pci string) string
	// Allocated records that Allocate handed out these PCI functions of
	// resource (the VFs of an exclusive pool, the HCAs of a shared one).
	Allocated(resource string, pcis []string)
}

// guardHolder returns what holds a device of pool outside the device
// plugin, and the PCI function it holds: the VF itself for an exclusive
// pool, any HCA of the pool for a shared slot (a slot grants every HCA).
func guardHolder(g Guard, pool *Pool, d *Device) (pci, holder string) {
	if g == nil {
		return "", ""
	}
	if pool.Spec.Kind == config.Shared {
		for _, h := range pool.HCAs {
			if who := g.Holder(h.PCI); who != "" {
				return h.PCI, who
			}
		}
		return "", ""
	}
	return d.PCI, g.Holder(d.PCI)
}

// heldError is Allocate's refusal of a device another allocator holds.
func heldError(resource, id, pci, holder string) error {
	what := "device " + id
	if pci != id {
		what += " (HCA " + pci + ")"
	}
	return fmt.Errorf("Allocate %s: %s is held by %s: a device never serves a DRA claim and a device-plugin allocation at once; "+
		"fix: kubelet picks another device once the next ListAndWatch (within the agent's --resync) reports this one Unhealthy; "+
		"or free it by deleting the pod that uses the claim, or request the device through the claim instead of %s",
		resource, what, holder, strings.TrimSpace(resource))
}
