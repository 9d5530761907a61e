package dra

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// RecentAllocation is how long a device-plugin Allocate of a device counts
// as a hold by itself: kubelet records the allocation (and PodResources
// lists the pod) only after Allocate returns, so for this long a DRA
// Prepare refuses the device even when PodResources does not show a pod
// holding it yet.
const RecentAllocation = 30 * time.Second

// Claimed is the node's one record of which PCI functions the DRA kubelet
// plugin holds for which claims, shared with the device plugin (it is the
// deviceplugin.Guard the agent hands every pool server): a device a claim
// holds is listed Unhealthy to kubelet and refused by the device plugin's
// Allocate; Allocate reports what it handed out, which Prepare refuses for
// RecentAllocation. Safe for concurrent use; nothing blocks.
type Claimed struct {
	mu   sync.Mutex
	held map[string]map[types.UID]string // PCI -> claim UID -> "ns/name"
	dp   map[string]dpAllocation         // PCI -> last device-plugin Allocate
	now  func() time.Time
}

type dpAllocation struct {
	resource string
	at       time.Time
}

// NewClaimed returns an empty registry.
func NewClaimed() *Claimed {
	return &Claimed{held: map[string]map[types.UID]string{}, dp: map[string]dpAllocation{}, now: time.Now}
}

// Holder implements deviceplugin.Guard: the DRA claims holding pci, "" when none.
func (c *Claimed) Holder(pci string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	claims := c.held[pci]
	if len(claims) == 0 {
		return ""
	}
	var out []string
	for uid, name := range claims {
		out = append(out, fmt.Sprintf("%s (%s)", name, uid))
	}
	sort.Strings(out)
	return "DRA claim " + strings.Join(out, ", DRA claim ")
}

// Allocated implements deviceplugin.Guard: kubelet's Allocate handed out pcis of resource.
func (c *Claimed) Allocated(resource string, pcis []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for _, p := range pcis {
		c.dp[p] = dpAllocation{resource: resource, at: now}
	}
	for p, a := range c.dp { // forget what is older than the window
		if now.Sub(a.at) > RecentAllocation {
			delete(c.dp, p)
		}
	}
}

// Observe learns what kubelet has recorded (PodResources): a device a pod
// is listed holding is kubelet's to account for from now on, so its recent
// Allocate stops counting as a hold by itself; when the pod is gone, the
// device is free at once rather than RecentAllocation after the Allocate.
func (c *Claimed) Observe(holders []DPHolder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range holders {
		if a, ok := c.dp[h.DeviceID]; ok && a.resource == h.Resource {
			delete(c.dp, h.DeviceID)
		}
	}
}

// ObservingUsers is a DevicePluginUsers that tells Claimed what every
// answer lists (Claimed.Observe).
type ObservingUsers struct {
	DevicePluginUsers
	Claimed *Claimed
}

// DevicePluginHolders implements DevicePluginUsers.
func (o ObservingUsers) DevicePluginHolders(ctx context.Context) ([]DPHolder, error) {
	hs, err := o.DevicePluginUsers.DevicePluginHolders(ctx)
	if err == nil {
		o.Claimed.Observe(hs)
	}
	return hs, err
}

// recentlyAllocated returns the resource whose Allocate handed out pci
// within RecentAllocation, and how long ago.
func (c *Claimed) recentlyAllocated(pci string) (string, time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.dp[pci]
	if !ok {
		return "", 0, false
	}
	age := c.now().Sub(a.at)
	if age > RecentAllocation {
		return "", 0, false
	}
	return a.resource, age, true
}

// hold records that claim uid (ns/name) holds pci.
func (c *Claimed) hold(pci string, uid types.UID, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held[pci] == nil {
		c.held[pci] = map[types.UID]string{}
	}
	c.held[pci][uid] = name
}

// release forgets every hold of claim uid.
func (c *Claimed) release(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for pci, claims := range c.held {
		delete(claims, uid)
		if len(claims) == 0 {
			delete(c.held, pci)
		}
	}
}

// others returns the claims other than uid that hold pci ("ns/name (uid)").
func (c *Claimed) others(pci string, uid types.UID) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for u, name := range c.held[pci] {
		if u != uid {
			out = append(out, fmt.Sprintf("%s (%s)", name, u))
		}
	}
	sort.Strings(out)
	return out
}
