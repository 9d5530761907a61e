package gc

import (
	"context"
	"errors"
	"fmt"

	v1alpha1 "github.com/rdmanet/rdmanet/api/ipam/v1alpha1"
	"github.com/rdmanet/rdmanet/internal/ipam"
)

// PodRef is one pod instance: its namespace, name and UID.
type PodRef struct {
	Namespace, Name, UID string
}

// ReleasePods releases the allocations of pods the caller knows are deleted
// or terminal (Succeeded/Failed), at any age: an allocation is released when
// its pod namespace, name and UID equal a key of gone, whose value is the
// Release reason (ReasonPodGone, ReasonPodDone).
//
// It is the event-driven half of GC (the controller calls it when it sees a
// pod deleted or terminal) and needs neither Options.Cluster nor a grace
// period: a UID is never reused, so an allocation carrying a deleted pod's
// UID can never belong to a live sandbox, and a terminal phase is final.
// Allocations without a pod UID and reservations are never touched (Run
// collects them). Options.Store, Network, DryRun and MaxAttempts apply;
// blocks are never deleted.
func ReleasePods(ctx context.Context, opts Options, gone map[PodRef]string) (Report, error) {
	var rep Report
	if opts.Store == nil {
		return rep, errors.New("rdmanet-ipam gc: Store is required")
	}
	if len(gone) == 0 {
		return rep, nil
	}
	blocks, err := opts.Store.List(ctx, ipam.Pool{}, "")
	if err != nil {
		return rep, fmt.Errorf("rdmanet-ipam gc: list blocks: %w", err)
	}
	decide := func(_ *v1alpha1.IPAMBlock, _ string, a v1alpha1.Allocation) (string, bool) {
		if a.PodUID == "" {
			return "", false
		}
		reason, ok := gone[PodRef{Namespace: a.PodNamespace, Name: a.PodName, UID: a.PodUID}]
		return reason, ok
	}
	err = walk(ctx, opts, blocks, &rep, decide, nil)
	return rep, err
}
