package gc_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	v1alpha1 "github.com/rdmanet/rdmanet/api/ipam/v1alpha1"
	"github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/internal/ipam/gc"
	"github.com/rdmanet/rdmanet/internal/ipam/ipamtest"
)

func TestReleasePods(t *testing.T) {
	ctx := context.Background()
	cfg, err := ipam.Parse([]byte(`{"cniVersion":"1.0.0","name":"t","ipam":{"range":"10.91.0.0/24","node_slice_size":"/28","gateway":"10.91.0.1"}}`), ipam.Env{})
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Ranges[0]
	ref := func(o ipam.Owner) gc.PodRef {
		return gc.PodRef{Namespace: o.PodNamespace, Name: o.PodName, UID: o.PodUID}
	}
	deleted := ipamtest.Owner("node-a", 1)
	terminal := ipamtest.Owner("node-a", 2)
	live := ipamtest.Owner("node-a", 3)
	noUID := ipamtest.Owner("node-a", 4)
	noUID.PodUID = ""
	sameNameOtherUID := ipamtest.Owner("node-a", 5)
	tests := []struct {
		name    string
		gone    map[gc.PodRef]string
		dryRun  bool
		want    map[string]string // pod name → reason of its released address
		keptPod []string          // pod names whose address stays
		// reserved is the reservations the pass saw (the gateway's, kept
		// always); 0 when it listed nothing.
		reserved int
	}{
		{
			name:     "deleted and terminal pods released at any age, others kept",
			gone:     map[gc.PodRef]string{ref(deleted): gc.ReasonPodGone, ref(terminal): gc.ReasonPodDone},
			want:     map[string]string{deleted.PodName: gc.ReasonPodGone, terminal.PodName: gc.ReasonPodDone},
			keptPod:  []string{live.PodName, noUID.PodName, sameNameOtherUID.PodName},
			reserved: 1,
		},
		{
			name:     "allocation without a pod UID is never released by name",
			gone:     map[gc.PodRef]string{{Namespace: noUID.PodNamespace, Name: noUID.PodName}: gc.ReasonPodGone},
			keptPod:  []string{deleted.PodName, terminal.PodName, live.PodName, noUID.PodName, sameNameOtherUID.PodName},
			reserved: 1,
		},
		{
			// The gateway's reservation has no pod identity: the empty
			// PodRef names it, and it stays.
			name:     "reservation kept even when gone holds the empty pod identity",
			gone:     map[gc.PodRef]string{{}: gc.ReasonPodGone},
			keptPod:  []string{deleted.PodName, terminal.PodName, live.PodName, noUID.PodName, sameNameOtherUID.PodName},
			reserved: 1,
		},
		{
			// The key decides, not the reason: an entry without one still
			// releases (reported with the empty reason).
			name:     "gone entry without a reason still releases",
			gone:     map[gc.PodRef]string{ref(deleted): ""},
			want:     map[string]string{deleted.PodName: ""},
			keptPod:  []string{terminal.PodName, live.PodName, noUID.PodName, sameNameOtherUID.PodName},
			reserved: 1,
		},
		{
			name:     "same name with another UID (recreated pod) is kept",
			gone:     map[gc.PodRef]string{{Namespace: sameNameOtherUID.PodNamespace, Name: sameNameOtherUID.PodName, UID: "old-uid"}: gc.ReasonPodGone},
			keptPod:  []string{deleted.PodName, terminal.PodName, live.PodName, noUID.PodName, sameNameOtherUID.PodName},
			reserved: 1,
		},
		{
			name:     "dry run reports without writing",
			gone:     map[gc.PodRef]string{ref(deleted): gc.ReasonPodGone},
			dryRun:   true,
			want:     map[string]string{deleted.PodName: gc.ReasonPodGone},
			keptPod:  []string{deleted.PodName, terminal.PodName, live.PodName, noUID.PodName, sameNameOtherUID.PodName},
			reserved: 1,
		},
		{
			name:    "nothing gone: no list, nothing released",
			keptPod: []string{deleted.PodName, terminal.PodName, live.PodName, noUID.PodName, sameNameOtherUID.PodName},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store := &ipam.LocalStore{Dir: t.TempDir()}
			// Allocated just now: Run would keep every one of them (grace).
			al := &ipam.Allocator{Store: store, Node: "node-a", Lock: &ipam.FileLock{Dir: filepath.Join(t.TempDir(), "lock")}, Now: time.Now}
			for _, o := range []ipam.Owner{deleted, terminal, live, noUID, sameNameOtherUID} {
				if _, err := al.Allocate(ctx, cfg.Network, r, o); err != nil {
					t.Fatal(err)
				}
			}
			rep, err := gc.ReleasePods(ctx, gc.Options{Store: store, DryRun: tc.dryRun}, tc.gone)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Reserved != tc.reserved || rep.Kept+len(rep.Released) != rep.Allocations {
				t.Errorf("report reserved=%d kept=%d released=%d allocations=%d; want reserved=%d and kept+released=allocations",
					rep.Reserved, rep.Kept, len(rep.Released), rep.Allocations, tc.reserved)
			}
			got := map[string]string{}
			for _, rel := range rep.Released {
				got[rel.Holder.PodName] = rel.Reason
			}
			if len(got) != len(tc.want) {
				t.Fatalf("released %v, want %v", got, tc.want)
			}
			for pod, reason := range tc.want {
				if got[pod] != reason {
					t.Errorf("pod %s: released with %q, want %q", pod, got[pod], reason)
				}
			}
			left := map[string]bool{}
			for _, a := range ipamtest.StoreAllocations(t, ctx, store, ipam.Pool{}) {
				left[a.PodName] = true
			}
			for _, pod := range tc.keptPod {
				if !left[pod] {
					t.Errorf("pod %s lost its address", pod)
				}
			}
			if len(left) != len(tc.keptPod) {
				t.Errorf("store holds %d pods' addresses, want %d (%v)", len(left), len(tc.keptPod), left)
			}
		})
	}
}

// failingStore fails every List.
type failingStore struct{ ipam.Store }

func (failingStore) List(context.Context, ipam.Pool, string) ([]v1alpha1.IPAMBlock, error) {
	return nil, ipam.ErrTransient
}

func TestReleasePodsListError(t *testing.T) {
	rep, err := gc.ReleasePods(context.Background(), gc.Options{Store: failingStore{}}, map[gc.PodRef]string{{Namespace: "ns", Name: "p", UID: "u"}: gc.ReasonPodGone})
	if !errors.Is(err, ipam.ErrTransient) || len(rep.Released) != 0 {
		t.Fatalf("ReleasePods = %+v, %v; want nothing released and ErrTransient", rep, err)
	}
}
