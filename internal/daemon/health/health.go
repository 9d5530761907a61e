// Package health is rdmanet-daemon's /healthz and /readyz: which checks
// each answers, over the daemon's servers and sockets.
package health

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rdmanet/rdmanet/internal/daemonclient"
	"github.com/rdmanet/rdmanet/internal/telemetry"
)

// Server is a socket server of the daemon (daemon.MetaServer, plugind.Server).
type Server interface {
	// Serving reports whether it is listening and accepting calls.
	Serving() bool
}

// Daemon is what the checks look at. A nil server (and its empty socket)
// is one the daemon does not run.
type Daemon struct {
	Meta         Server
	MetaSocket   string
	Plugins      Server
	PluginSocket string
	// SourceReady is set once the pod and NAD informer caches have synced
	// (source "kubernetes") or the static source is loaded; nil: no source
	// (--meta=false).
	SourceReady *atomic.Bool
	SourceType  string
	// ProbeTimeout bounds one socket probe of /readyz (default 2s).
	ProbeTimeout time.Duration

	metaStarted, pluginsStarted atomic.Bool
}

// Live are the checks of /healthz: each server, once it has started, is
// still serving (a server that stopped is a daemon on its way out). During
// the informer sync, before the servers start, the daemon is alive.
func (d *Daemon) Live() telemetry.Checks {
	var cs telemetry.Checks
	if d.Meta != nil {
		cs = append(cs, telemetry.Check{Name: "meta-server", Fn: func() error { return alive(d.Meta, &d.metaStarted, "meta socket", d.MetaSocket) }})
	}
	if d.Plugins != nil {
		cs = append(cs, telemetry.Check{Name: "plugin-server", Fn: func() error { return alive(d.Plugins, &d.pluginsStarted, "plugin socket", d.PluginSocket) }})
	}
	return cs
}

func alive(s Server, started *atomic.Bool, what, socket string) error {
	if s.Serving() {
		started.Store(true)
		return nil
	}
	if started.Load() {
		return fmt.Errorf("the %s server (%s) stopped serving", what, socket)
	}
	return nil
}

// Ready are the checks of /readyz: the source is synced, and each socket
// answers a probe (daemonclient.Probe: the call a shim or plugin makes, without a
// CNI verb).
func (d *Daemon) Ready() telemetry.Checks {
	var cs telemetry.Checks
	if d.SourceReady != nil {
		cs = append(cs, telemetry.Check{Name: "source", Fn: func() error {
			if d.SourceReady.Load() {
				return nil
			}
			if d.SourceType == "static" {
				return errors.New("the static source is not loaded yet")
			}
			return errors.New("the pod and NetworkAttachmentDefinition informer caches have not synced yet (the API server is unreachable or slow; see --sync-timeout)")
		}})
	}
	if d.Meta != nil {
		cs = append(cs, telemetry.Check{Name: "meta-socket", Fn: func() error { return d.probe(d.Meta, d.MetaSocket) }})
	}
	if d.Plugins != nil {
		cs = append(cs, telemetry.Check{Name: "plugin-socket", Fn: func() error { return d.probe(d.Plugins, d.PluginSocket) }})
	}
	return cs
}

func (d *Daemon) probe(s Server, socket string) error {
	if !s.Serving() {
		return fmt.Errorf("%s: not serving yet", socket)
	}
	t := d.ProbeTimeout
	if t <= 0 {
		t = 2 * time.Second
	}
	return daemonclient.Probe(socket, t)
}
