package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/internal/ipam/gc"
	"github.com/rdmanet/rdmanet/internal/ipam/ipamtest"
)

// gcStore allocates three addresses on node-a: a live pod's, a deleted
// pod's and a recreated pod's (same name, new UID).
func gcStore(t *testing.T) (*ipam.LocalStore, *ipamtest.Cluster) {
	t.Helper()
	ctx := context.Background()
	cfg, err := ipam.Parse([]byte(`{"cniVersion":"1.0.0","name":"rdma-training","ipam":{"range":"10.90.0.0/24","node_slice_size":"/28"}}`), ipam.Env{})
	if err != nil {
		t.Fatal(err)
	}
	store := &ipam.LocalStore{Dir: t.TempDir()}
	a := &ipam.Allocator{Store: store, Node: "node-a", Lock: &ipam.FileLock{Dir: filepath.Join(t.TempDir(), "lock")}}
	live, gone, recreated := ipamtest.Owner("node-a", 1), ipamtest.Owner("node-a", 2), ipamtest.Owner("node-a", 3)
	for _, o := range []ipam.Owner{live, gone, recreated} {
		if _, err := a.Allocate(ctx, cfg.Network, cfg.Ranges[0], o); err != nil {
			t.Fatal(err)
		}
	}
	return store, &ipamtest.Cluster{
		PodsByKey: map[string]gc.Pod{
			live.PodNamespace + "/" + live.PodName:           {UID: live.PodUID},
			recreated.PodNamespace + "/" + recreated.PodName: {UID: "new-uid"},
		},
		NodeNames: map[string]bool{"node-a": true},
	}
}

func runIPAM(t *testing.T, deps ipamDeps, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := newIPAMCmdWith(streams{in: strings.NewReader(""), out: &out, err: &errb}, deps)
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	code := execute(cmd, args, &errb)
	return code, out.String(), errb.String()
}

func TestIPAMGC(t *testing.T) {
	store, cluster := gcStore(t)
	var seen ipamConnOptions
	deps := ipamDeps{connect: func(o ipamConnOptions) (ipam.Store, gc.Cluster, error) {
		seen = o
		return store, cluster, nil
	}}

	// The allocations were just made: the default grace period keeps them.
	code, out, errs := runIPAM(t, deps, "gc", "--dry-run")
	if code != 0 || !strings.Contains(out, "released=0 kept=3") || !strings.Contains(out, "young=2") {
		t.Fatalf("dry run within the grace period: exit %d, want nothing released and 2 young allocations kept\n%s%s", code, out, errs)
	}

	code, out, errs = runIPAM(t, deps, "gc", "--dry-run", "--grace", "0", "--kubeconfig", "/k/config")
	if code != 0 || seen.kubeconfig != "/k/config" {
		t.Fatalf("dry run: exit %d, kubeconfig %q\n%s%s", code, seen.kubeconfig, out, errs)
	}
	for _, w := range []string{"would release 10.90.0.", gc.ReasonPodGone, gc.ReasonPodReplaced, "released=2 kept=1", "dry_run=true"} {
		if !strings.Contains(out, w) {
			t.Errorf("dry run output lacks %q:\n%s", w, out)
		}
	}

	code, out, _ = runIPAM(t, deps, "gc", "-o", "json", "--grace=0")
	if code != 0 {
		t.Fatalf("gc: exit %d\n%s", code, out)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &top); err != nil {
		t.Fatal(err)
	}
	if got := keysOf(top); got != "allocations,blocks,deleted_blocks,dry_run,kept,released,reserved,young" {
		t.Errorf("top-level keys %s", got)
	}
	var rep gcReportJSON
	_ = json.Unmarshal([]byte(out), &rep)
	if rep.DryRun || rep.Allocations != 3 || rep.Kept != 1 || len(rep.Released) != 2 {
		t.Fatalf("report %+v", rep)
	}
	reasons := map[string]bool{}
	for _, r := range rep.Released {
		reasons[r.Reason] = true
		if r.Pod == "" || r.ContainerID == "" || r.IfName == "" || r.Network != "default" || r.Block == "" || !strings.HasPrefix(r.Address, "10.90.0.") {
			t.Errorf("release %+v lacks identity", r)
		}
	}
	if !reasons[gc.ReasonPodGone] || !reasons[gc.ReasonPodReplaced] {
		t.Errorf("reasons %v", reasons)
	}

	code, out, _ = runIPAM(t, deps, "gc", "--grace=0")
	if code != 0 || !strings.Contains(out, "released=0 kept=1") {
		t.Errorf("second pass: exit %d\n%s", code, out)
	}
}

func TestIPAMGCErrors(t *testing.T) {
	store, cluster := gcStore(t)
	ok := ipamDeps{connect: func(ipamConnOptions) (ipam.Store, gc.Cluster, error) { return store, cluster, nil }}
	bad := ipamDeps{connect: func(ipamConnOptions) (ipam.Store, gc.Cluster, error) {
		return nil, nil, errors.New("load kubeconfig: no configuration has been provided")
	}}
	broken := ipamDeps{connect: func(ipamConnOptions) (ipam.Store, gc.Cluster, error) {
		return store, &failingCluster{}, nil
	}}
	for _, tc := range []struct {
		name string
		deps ipamDeps
		args []string
		code int
		err  string
	}{
		{name: "no subcommand", deps: ok, args: nil, code: 2, err: "give a subcommand"},
		{name: "bad output", deps: ok, args: []string{"gc", "-o", "yaml"}, code: 2, err: "want text or json"},
		{name: "bad store", deps: ok, args: []string{"gc", "--store", "etcd"}, code: 2, err: "want kubernetes or local"},
		{name: "unusable kubeconfig", deps: bad, args: []string{"gc"}, code: 2, err: "no configuration"},
		{name: "API server fails", deps: broken, args: []string{"gc"}, code: 1, err: "list pods"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runIPAM(t, tc.deps, tc.args...)
			if code != tc.code || !strings.Contains(errs, tc.err) {
				t.Errorf("exit %d (want %d), stderr %q (want %q)\n%s", code, tc.code, errs, tc.err, out)
			}
		})
	}
	// registered under the root as `ipam gc`
	code, out, _ := runCmd(t, "", "ipam", "gc", "--help")
	if code != 0 || !strings.Contains(out, "--dry-run") {
		t.Errorf("ipam gc --help: exit %d\n%s", code, out)
	}
}

type failingCluster struct{}

func (failingCluster) Pods(context.Context) (map[string]gc.Pod, error) {
	return nil, errors.New("connection refused")
}
func (failingCluster) Nodes(context.Context) (map[string]bool, error) { return nil, nil }
