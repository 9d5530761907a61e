package gc_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/internal/ipam/gc"
	"github.com/rdmanet/rdmanet/internal/ipam/ipamtest"
)

// TestBeforeRelease: Options.BeforeRelease sees every release before the
// block is written; its error keeps that allocation (Held) and fails the
// pass, the others are released; a dry run does not call it; Run and
// ReleasePods both honour it.
func TestBeforeRelease(t *testing.T) {
	ctx := context.Background()
	cfg, err := ipam.Parse([]byte(`{"cniVersion":"1.0.0","name":"t","ipam":{"range":"10.92.0.0/24","node_slice_size":"/28"}}`), ipam.Env{})
	if err != nil {
		t.Fatal(err)
	}
	ok, refused := ipamtest.Owner("node-a", 1), ipamtest.Owner("node-a", 2)
	errRefused := errors.New("fabric manager unreachable")
	tests := []struct {
		name     string
		dryRun   bool
		run      bool // gc.Run (pods gone from the cluster) instead of ReleasePods
		wantSeen []string
		wantLeft []string
		wantHeld int
	}{
		{name: "ReleasePods: refused kept, other released", wantSeen: []string{ok.PodName, refused.PodName}, wantLeft: []string{refused.PodName}, wantHeld: 1},
		{name: "Run: refused kept, other released", run: true, wantSeen: []string{ok.PodName, refused.PodName}, wantLeft: []string{refused.PodName}, wantHeld: 1},
		{name: "dry run: not called", dryRun: true, wantLeft: []string{ok.PodName, refused.PodName}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store := &ipam.LocalStore{Dir: t.TempDir()}
			al := &ipam.Allocator{Store: store, Node: "node-a", Lock: &ipam.FileLock{Dir: filepath.Join(t.TempDir(), "lock")}, Now: time.Now}
			for _, o := range []ipam.Owner{ok, refused} {
				if _, err := al.Allocate(ctx, cfg.Network, cfg.Ranges[0], o); err != nil {
					t.Fatal(err)
				}
			}
			var seen []string
			opts := gc.Options{Store: store, DryRun: tc.dryRun, Grace: gc.NoGrace, BeforeRelease: func(_ context.Context, r gc.Release) error {
				seen = append(seen, r.Holder.PodName)
				if r.Holder.PodName == refused.PodName {
					return errRefused
				}
				return nil
			}}
			var rep gc.Report
			if tc.run {
				opts.Cluster = &ipamtest.Cluster{PodsByKey: map[string]gc.Pod{}, NodeNames: map[string]bool{"node-a": true}}
				rep, err = gc.Run(ctx, opts)
			} else {
				rep, err = gc.ReleasePods(ctx, opts, map[gc.PodRef]string{
					{Namespace: ok.PodNamespace, Name: ok.PodName, UID: ok.PodUID}:                gc.ReasonPodGone,
					{Namespace: refused.PodNamespace, Name: refused.PodName, UID: refused.PodUID}: gc.ReasonPodGone,
				})
			}
			if tc.wantHeld > 0 && !errors.Is(err, errRefused) {
				t.Errorf("pass error = %v, want the hook's", err)
			}
			if tc.wantHeld == 0 && err != nil {
				t.Fatal(err)
			}
			slices.Sort(seen)
			if !slices.Equal(seen, tc.wantSeen) {
				t.Errorf("BeforeRelease saw %v, want %v", seen, tc.wantSeen)
			}
			if rep.Held != tc.wantHeld {
				t.Errorf("Held = %d, want %d", rep.Held, tc.wantHeld)
			}
			var left []string
			for _, a := range ipamtest.StoreAllocations(t, ctx, store, ipam.Pool{}) {
				left = append(left, a.PodName)
			}
			slices.Sort(left)
			if !slices.Equal(left, tc.wantLeft) {
				t.Errorf("left allocated: %v, want %v", left, tc.wantLeft)
			}
		})
	}
}
