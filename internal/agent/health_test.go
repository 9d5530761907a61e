package agent

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// countingObserver records registrations and kubelet restarts.
type countingObserver struct {
	mu       sync.Mutex
	ok, fail map[string]int
	restarts int
}

func (o *countingObserver) Registered(resource string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		o.fail[resource]++
	} else {
		o.ok[resource]++
	}
}

func (o *countingObserver) KubeletRestarted() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.restarts++
}

func (o *countingObserver) counts(resource string) (int, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ok[resource], o.restarts
}

// TestHealthAndObserver walks the agent through kubelet's absence, its
// start and a restart, checking readiness, liveness, the pool figures and
// what the observer counts after each step.
func TestHealthAndObserver(t *testing.T) {
	const res = "example.com/sriov_rdma"
	base, node, dp, cfg := seedNode(t)
	obs := &countingObserver{ok: map[string]int{}, fail: map[string]int{}}
	a, err := New(Options{SysfsRoot: node.Root, ConfigPaths: []string{cfg}, PluginDir: dp, DevInfoDir: filepath.Join(base, "devinfo"),
		NetnsModeFlag: "exclusive", Resync: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)), Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Scanned(); err == nil || !strings.Contains(err.Error(), "has not been scanned yet") {
		t.Fatalf("Scanned before Run = %v", err)
	}
	if err := a.Alive(time.Minute); err == nil {
		t.Fatal("Alive before Run: nil")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	kubelet := filepath.Join(dp, "kubelet.sock")
	var reg *registrar
	steps := []struct {
		name         string
		do           func()
		wantReady    string // substring of Registered's error; "" ready
		wantOK       int    // successful registrations so far
		wantRestarts int
	}{
		{name: "no kubelet: not ready, names the socket", do: func() {},
			wantReady: "pool " + res + " is not registered: no kubelet registration socket at " + kubelet},
		{name: "kubelet starts: registered, ready", do: func() { reg = startRegistrar(t, kubelet) }, wantOK: 1},
		{name: "kubelet restarts (wiping the plugin dir): re-registered", do: func() {
			reg.srv.Stop()
			ents, err := os.ReadDir(dp)
			if err != nil {
				t.Fatal(err)
			}
			for _, en := range ents {
				if err := os.Remove(filepath.Join(dp, en.Name())); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(200 * time.Millisecond) // the agent looks while kubelet is away
			reg = startRegistrar(t, kubelet)
		}, wantOK: 2, wantRestarts: 1},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.do()
			eventually(t, "the step's state", func() bool {
				ok, restarts := obs.counts(res)
				err := a.Registered()
				ready := err == nil && st.wantReady == "" || err != nil && st.wantReady != "" && strings.Contains(err.Error(), st.wantReady)
				return ready && ok == st.wantOK && restarts == st.wantRestarts
			})
			ok, restarts := obs.counts(res)
			if err := a.Registered(); (err == nil) != (st.wantReady == "") || ok != st.wantOK || restarts != st.wantRestarts {
				t.Fatalf("Registered = %v, registrations %d, restarts %d", err, ok, restarts)
			}
			if err := a.Scanned(); err != nil {
				t.Fatal(err)
			}
			if err := a.Alive(time.Second); err != nil {
				t.Fatalf("Alive = %v", err)
			}
			stats := a.PoolStats()
			if len(stats) != 1 || stats[0].Resource != res || stats[0].Kind != "exclusive" || !stats[0].Advertised ||
				stats[0].Devices != 4 || stats[0].Healthy != 4 || stats[0].Registered != (st.wantReady == "") {
				t.Fatalf("PoolStats = %+v", stats)
			}
		})
	}
	cancel()
	<-done
	done <- nil
	time.Sleep(50 * time.Millisecond)
	if err := a.Alive(10 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "it is stuck") {
		t.Fatalf("Alive after Run returned = %v, want stuck", err)
	}
}
