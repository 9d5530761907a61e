package health

import (
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

type server struct{ on atomic.Bool }

func (s *server) Serving() bool { return s.on.Load() }

// answering serves a unix socket that answers every connection with one
// byte, as the daemon answers a probe.
func answering(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "d.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("{"))
			c.Close()
		}
	}()
	return sock
}

func TestDaemonChecks(t *testing.T) {
	sock := answering(t)
	missing := filepath.Join(t.TempDir(), "gone.sock")
	tests := []struct {
		name                 string
		metaOn, pluginsOn    bool
		wasServing           bool // the servers served before this look
		synced               bool
		sourceType           string
		metaSock, pluginSock string
		noPlugins, noMeta    bool
		wantLive, wantReady  []string // failing lines ("" none)
	}{
		{name: "syncing informers: alive, not ready", sourceType: "kubernetes", metaSock: sock, pluginSock: sock,
			wantReady: []string{"source: the pod and NetworkAttachmentDefinition informer caches have not synced yet", "meta-socket: " + sock + ": not serving yet", "plugin-socket: " + sock + ": not serving yet"}},
		{name: "static source not loaded", sourceType: "static", metaSock: sock, noPlugins: true, metaOn: true,
			wantReady: []string{"source: the static source is not loaded yet"}},
		{name: "serving and synced: ready", metaOn: true, pluginsOn: true, synced: true, metaSock: sock, pluginSock: sock},
		{name: "socket file gone: not ready, names it", metaOn: true, pluginsOn: true, synced: true, metaSock: missing, pluginSock: sock,
			wantReady: []string{"meta-socket: daemon socket " + missing}},
		{name: "meta server stopped after serving: not alive", pluginsOn: true, wasServing: true, synced: true, metaSock: sock, pluginSock: sock,
			wantLive: []string{"meta-server: the meta socket server (" + sock + ") stopped serving"}, wantReady: []string{"meta-socket: " + sock + ": not serving yet"}},
		{name: "plugins only (--meta=false)", noMeta: true, pluginsOn: true, pluginSock: sock},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, p := &server{}, &server{}
			var synced atomic.Bool
			d := &Daemon{ProbeTimeout: time.Second, SourceType: tt.sourceType}
			if !tt.noMeta {
				d.Meta, d.MetaSocket, d.SourceReady = m, tt.metaSock, &synced
			}
			if !tt.noPlugins {
				d.Plugins, d.PluginSocket = p, tt.pluginSock
			}
			if tt.wasServing {
				m.on.Store(true)
				p.on.Store(true)
				_ = d.Live().Failures()
			}
			m.on.Store(tt.metaOn)
			p.on.Store(tt.pluginsOn)
			synced.Store(tt.synced)
			check := func(kind string, got, want []string) {
				if len(got) != len(want) {
					t.Fatalf("%s failures %q, want %q", kind, got, want)
				}
				for i := range want {
					if !strings.HasPrefix(got[i], want[i]) {
						t.Fatalf("%s failure %q, want %q...", kind, got[i], want[i])
					}
				}
			}
			check("live", d.Live().Failures(), tt.wantLive)
			check("ready", d.Ready().Failures(), tt.wantReady)
		})
	}
}
