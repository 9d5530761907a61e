package fleetbench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmanet/rdmanet/test/apiserver"
)

// TestSmoke runs the whole benchmark on 5 nodes against the real API
// server (the apiserver tier's binaries) and fails when it measured
// nothing or a goal is broken: writes at steady state, more than one slice
// write per device change, more than 2 writes of the CNI path per
// device-plugin pod, more than one in-use taint write per device-plugin
// pod, no claim status for a DRA pod, the controller not releasing a dead
// node's addresses.
func TestSmoke(t *testing.T) {
	if _, err := apiserver.FindBinaries(); err != nil {
		t.Fatalf("the smoke needs the apiserver tier's binaries: %v", err)
	}
	root, err := apiserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "rdmanet-controller")
	build := exec.Command("go", "build", "-o", bin, "./cmd/rdmanet-controller")
	build.Dir, build.Stderr = root, os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("build rdmanet-controller: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	r, err := Run(ctx, Options{Nodes: 5, FullAgents: 2, Settle: 15 * time.Second, Steady: 30 * time.Second, Pods: 12, DRAEvery: 4,
		Controller: ControllerOptions{Addresses: 400, Bin: bin, Settle: 2 * time.Second}, Progress: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	var details strings.Builder
	r.Details(&details)
	t.Logf("%s\n%s", r.Line(0), details.String())
	f := r.Figures()
	all := func(Key) bool { return true }
	checks := []struct {
		name string
		bad  bool
	}{
		{"the nodes made requests at steady state (watches at least)", r.Steady.Node.Sum(all) == 0 && r.Steady.NodeWatches == 0},
		{"the server reports open watches", r.Steady.ServerWatches == 0},
		{"every node keeps its watches open (pods, NADs, ResourceSlices)", f.WatchesPerNode < 3},
		{"no writes at steady state", r.Steady.Node.Writes() != 0},
		{"the flap caused slice writes", r.Flap.SliceWrites == 0},
		{"at most one slice write per device change", f.SliceWritesPerFlap > 1},
		{"every pod started", r.Job.Failed != 0 || r.Job.DPPods == 0 || r.Job.DRAPods == 0},
		{"the CNI path wrote for the device-plugin pods", f.CNIWritesPerDPPod == 0},
		{"at most 2 CNI-path writes per device-plugin pod", f.CNIWritesPerDPPod > 2},
		{"at most one in-use taint write per device-plugin pod", f.AgentWritesPerDPPod > 1},
		// a DRA pod adds its claim's device status to the CNI path's writes;
		// the IPAM write may be shared with pods starting beside it
		{"every DRA pod wrote its claim's device status", r.Job.DRA.Sum(func(k Key) bool { return k.Resource == "resourceclaims/status" && IsWrite(k.Verb) }) != int64(r.Job.DRAPods)},
		{"at most 3 writes per DRA pod (2 + its claim's status)", f.WritesPerDRAPod > 3},
		{"the controller ran with the addresses", r.Controller == nil || r.Controller.RSS == 0 || r.Controller.Addresses < 400},
		{"the controller released the dead node's addresses", r.Controller == nil || r.Controller.GCLatency == 0 || r.Controller.GCReleased == 0},
	}
	for _, c := range checks {
		if c.bad {
			t.Errorf("goal or count broken: %s", c.name)
		}
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
