package agent

// What the agent says of itself: liveness and readiness (/healthz,
// /readyz) and each pool's figures for metrics.

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rdmanet/rdmanet/internal/deviceplugin"
)

// Alive is the agent's liveness (/healthz): nil while the Run loop goes
// round (every Resync, or after a rescan and registrations) within maxAge.
func (a *Agent) Alive(maxAge time.Duration) error {
	return a.beat.Fresh(maxAge)
}

// Scanned is part of the agent's readiness (/readyz): nil once the node's
// inventory has been discovered and the pools built.
func (a *Agent) Scanned() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.last == nil {
		return errors.New("the node's RDMA inventory has not been scanned yet (or discovery failed: see the log)")
	}
	return nil
}

// Registered is the rest of the agent's readiness: nil when every
// advertised pool is served and registered with kubelet (always, with
// NoDevicePlugin), else which pools are not and why. A node without advertised pools (no RDMA hardware the
// config selects) is ready: nothing waits for it.
func (a *Agent) Registered() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.last == nil {
		return errors.New("no pools built yet")
	}
	var missing []string
	for _, p := range a.last.Pools {
		switch {
		case !p.Advertised, a.o.NoDevicePlugin:
		case a.servers[p.Resource] == nil:
			missing = append(missing, fmt.Sprintf("pool %s is not served (its socket in %s could not be created; see the log)", p.Resource, a.o.PluginDir))
		case !a.registered[p.Resource] && a.kubeletIno == 0:
			missing = append(missing, fmt.Sprintf("pool %s is not registered: no kubelet registration socket at %s", p.Resource, a.o.KubeletSocket))
		case !a.registered[p.Resource]:
			missing = append(missing, fmt.Sprintf("pool %s is not registered with kubelet at %s yet", p.Resource, a.o.KubeletSocket))
		}
	}
	if len(missing) > 0 {
		return errors.New(strings.Join(missing, "; "))
	}
	return nil
}

// PoolStat is one pool as the agent serves it now, for metrics.
type PoolStat struct {
	Resource, Kind string
	// Advertised: offered to kubelet (false when the pool cannot work);
	// Registered: kubelet accepted its current server.
	Advertised, Registered bool
	// Devices are the pool's schedulable units (VFs or shared slots),
	// Healthy those reported Healthy to kubelet.
	Devices, Healthy int
}

// PoolStats returns every configured pool of the last scan, in config order.
func (a *Agent) PoolStats() []PoolStat {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.last == nil {
		return nil
	}
	out := make([]PoolStat, 0, len(a.last.Pools))
	for _, p := range a.last.Pools {
		st := PoolStat{Resource: p.Resource, Kind: p.Kind, Advertised: p.Advertised, Registered: a.registered[p.Resource] && a.servers[p.Resource] != nil, Devices: len(p.Devices)}
		for _, d := range p.Devices {
			if d.Health == deviceplugin.Healthy {
				st.Healthy++
			}
		}
		out = append(out, st)
	}
	return out
}
