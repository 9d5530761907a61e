package dra

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"

	"github.com/rdmanet/rdmanet/internal/agent"
)

// TestHealthLatencyThroughAgent measures how long a prepared VF's link
// change takes to reach kubelet's health stream through the whole path:
// the sysfs change, the agent's refresh at its default --resync (500 ms),
// Driver.Update, the health hub, the kubeletplugin helper's gRPC stream.
// It logs the figure (the goal is 2 s, at most one --resync plus
// microseconds) and asserts only that every change arrives, in order.
//
//	go test ./internal/dra -run TestHealthLatencyThroughAgent -v | grep 'dra health latency'
func TestHealthLatencyThroughAgent(t *testing.T) {
	const vf, flaps = "vf-0000-41-00-2", 5
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := newDriverEnv(t)
	d := e.healthDriver(t, &healthRecorder{})
	if r := prepare(t, d, reserve(newClaim("uid-1", "c", alloc{"nic", vf}), podUsing("trainer-0"))); r.Err != nil {
		t.Fatal(r.Err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "pools.json")
	if err := os.WriteFile(cfg, []byte(cfgAll), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Options{SysfsRoot: e.s.Root, ConfigPaths: []string{cfg}, PluginDir: filepath.Join(dir, "dp"),
		DevInfoDir: e.devInfo, NoDevicePlugin: true, Logger: testLogger(t),
		Snapshots: func(s *agent.Snapshot) { d.Update(s.Node, s.Pools) }})
	if err != nil {
		t.Fatal(err)
	}
	actx, stopAgent := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(actx) }()
	defer func() { stopAgent(); <-done }()

	paths := pluginDirs(t)
	h, err := d.Start(ctx, fake.NewClientset(), paths)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	st := healthStream(t, ctx, filepath.Join(paths.PluginDir, "dra.sock"))
	recvHealth(t, st, vf, drahealthv1.HealthStatus_HEALTHY)

	var lat []time.Duration
	for i := 0; i < flaps; i++ {
		for _, step := range []struct {
			oper string
			want drahealthv1.HealthStatus
		}{{"down", drahealthv1.HealthStatus_UNHEALTHY}, {"up", drahealthv1.HealthStatus_HEALTHY}} {
			t0 := time.Now()
			if err := e.s.SetOperState("enp65s0f0v0", step.oper); err != nil {
				t.Fatal(err)
			}
			recvHealth(t, st, vf, step.want)
			lat = append(lat, time.Since(t0))
		}
	}
	slices.Sort(lat)
	t.Logf("dra health latency (sysfs operstate change -> kubelet health stream, agent --resync 500ms): n=%d p50=%s max=%s (goal 2s)",
		len(lat), lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
}
