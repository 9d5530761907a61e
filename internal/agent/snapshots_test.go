package agent

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rdmanet/rdmanet/internal/deviceplugin"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

// TestSnapshotsHook: Options.Snapshots (the DRA publisher's feed, --dra)
// sees the first discovery, a health change found by the cheap refresh,
// and a VF vanishing (rediscovery); refreshes that change nothing do not
// call it.
func TestSnapshotsHook(t *testing.T) {
	const res = "example.com/sriov_rdma"
	base, node, dp, cfg := seedNode(t)
	type seen struct{ devices, unhealthy int }
	var mu sync.Mutex
	var calls []seen
	hook := func(s *Snapshot) {
		var v seen
		for _, p := range s.Pools {
			if p.Resource != res {
				continue
			}
			for _, d := range p.Devices {
				v.devices++
				if d.Health != deviceplugin.Healthy {
					v.unhealthy++
				}
			}
		}
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, v)
	}
	runAgent(t, base, node.Root, dp, cfg, hook, false)

	// wait: n calls so far, the last seeing want; exact false allows more
	// (a VF removal is two sysfs writes a refresh may see apart).
	wait := func(what string, want seen, n int, exact bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			mu.Lock()
			got := append([]seen(nil), calls...)
			mu.Unlock()
			if (len(got) == n || !exact && len(got) > n) && got[len(got)-1] == want {
				return
			}
			if exact && len(got) > n {
				t.Fatalf("%s: %d calls %v, want %d ending with %+v", what, len(got), got, n, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%s: calls %v, want %d ending with %+v", what, calls, n, want)
	}
	wait("first discovery", seen{devices: 4}, 1, true)
	time.Sleep(200 * time.Millisecond) // ten refreshes without a change
	wait("refreshes without a change", seen{devices: 4}, 1, true)
	vf1 := sysfsfixture.VFBDF(node.RoCE.BDF, 1)
	if err := node.SetPortState(node.RDMAByBD[vf1], "1: DOWN"); err != nil {
		t.Fatal(err)
	}
	wait("VF 1 port down", seen{devices: 4, unhealthy: 1}, 2, true)
	if err := node.SetNumVFs(node.RoCE, 4, 3); err != nil {
		t.Fatal(err)
	}
	wait("VF 3 gone", seen{devices: 3, unhealthy: 1}, 3, false)
}

// TestNoDevicePlugin: with NoDevicePlugin (--device-plugin=false, DRA only)
// the pools are discovered and handed to Snapshots as usual, but no pool
// socket is created for kubelet, and readiness does not wait for a
// registration that will never come.
func TestNoDevicePlugin(t *testing.T) {
	base, node, dp, cfg := seedNode(t)
	var mu sync.Mutex
	advertised := 0
	hook := func(s *Snapshot) {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range s.Pools {
			if p.Advertised && len(p.Devices) == 4 {
				advertised++
			}
		}
	}
	a := runAgent(t, base, node.Root, dp, cfg, hook, true)
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := advertised
		mu.Unlock()
		if n > 0 && a.Scanned() == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no snapshot with the advertised pool of 4 VFs after 30s (scanned: %v)", a.Scanned())
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // a few resync rounds
	ents, _ := os.ReadDir(dp)
	for _, e := range ents {
		t.Errorf("device plugin dir has %s: no pool may be served to kubelet", e.Name())
	}
	if a.Server("example.com/sriov_rdma") != nil {
		t.Error("a pool server runs")
	}
	if err := a.Registered(); err != nil {
		t.Errorf("Registered() = %v, want ready (nothing to register)", err)
	}
}

// seedNode is a standard fixture node with 4 RoCE VFs, an empty device
// plugin dir and the seed's SR-IOV pool config, all under a temp dir.
func seedNode(t *testing.T) (base string, node *sysfsfixture.Standard, dp, cfg string) {
	t.Helper()
	base = t.TempDir()
	node, err := sysfsfixture.NewStandard(filepath.Join(base, "sys"), sysfsfixture.StandardOptions{RoCEVFs: 4})
	if err != nil {
		t.Fatal(err)
	}
	dp, cfg = filepath.Join(base, "dp"), filepath.Join(base, "config.json")
	if err := os.MkdirAll(dp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(seedSriov), 0o644); err != nil {
		t.Fatal(err)
	}
	return base, node, dp, cfg
}

// runAgent runs an agent over a seedNode (fast resync, Snapshots hook) until
// the test ends.
func runAgent(t *testing.T, base, sysfs, dp, cfg string, hook func(*Snapshot), noDevicePlugin bool) *Agent {
	t.Helper()
	a, err := New(Options{SysfsRoot: sysfs, ConfigPaths: []string{cfg}, PluginDir: dp, DevInfoDir: filepath.Join(base, "devinfo"),
		NetnsModeFlag: "exclusive", Resync: 20 * time.Millisecond, FullRescan: time.Hour,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)), Snapshots: hook, NoDevicePlugin: noDevicePlugin})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return a
}
