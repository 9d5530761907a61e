package daemon

import (
	"context"
	"sync/atomic"

	"github.com/rdmanet/rdmanet/internal/cni/meta"
	"github.com/rdmanet/rdmanet/internal/cni/meta/kube"
	"github.com/rdmanet/rdmanet/internal/daemon/metrics"
)

// connect gives the meta server what its calls read and write, as the
// config says: the static directory, or the API server (informer caches of
// the node's pods and every NAD, ResourceSlices for DRA devices and, with
// --pod-events, the pods' Events); kubelet's PodResources, connected at
// once and kept connected; and with
// --status-write=async the network-status writer. The func it returns
// releases them. Its error is an *ExitError.
func (d *MetaServer) connect(ctx context.Context, c Config, conf *meta.NetConf, m *metrics.Metrics, sourceReady *atomic.Bool) (func(), error) {
	var release []func()
	done := func() {
		for i := len(release) - 1; i >= 0; i-- {
			release[i]()
		}
	}
	var claims kube.ClaimDeviceResolver // DRA devices of pods: from ResourceSlices
	switch conf.Source.Type {
	case "static":
		d.Source = &meta.StaticSource{Dir: conf.Source.Dir, StatusDir: conf.Source.StatusDir}
		sourceReady.Store(true)
	default:
		live, err := kube.NewKubeSource(conf.Kubeconfig, 50)
		if err != nil {
			return nil, failed("%w", err)
		}
		claims = kube.NewSliceResolver(live.Core, c.NodeName)
		sctx, cancel := context.WithTimeout(ctx, c.SyncTimeout)
		cs, err := kube.NewCachedSource(sctx, live, c.NodeName)
		cancel()
		if err != nil {
			return nil, failed("%w", err)
		}
		d.Source = cs
		sourceReady.Store(true)
		if c.PodEvents {
			ev := kube.NewKubeEvents(live.Core, c.NodeName)
			release = append(release, ev.Shutdown)
			d.Events = ev
		}
	}
	prc, err := kube.NewPodResourcesClient(conf.PodResourcesSocket)
	if err != nil {
		done()
		return nil, failed("%w", err)
	}
	release = append(release, func() { _ = prc.Close() })
	prc.Claims = claims
	// dialed now, not at the first ADD: under a burst every ADD would wait
	// on that one connect
	prc.KeepConnected()
	d.Devices = prc
	if c.StatusWrite == "async" {
		d.AsyncStatus = &StatusWriter{Source: d.Source, Log: d.Log, Timeout: conf.APITimeoutDur, Observer: d.Observer}
		if m != nil {
			m.PendingStatusWrites(d.AsyncStatus.Pending)
		}
	}
	return done, nil
}
