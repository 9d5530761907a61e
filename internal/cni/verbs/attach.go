package verbs

import (
	"encoding/json"
	"fmt"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/internal/cni/vfrecord"
	"github.com/rdmanet/rdmanet/internal/netops"
)

// Attach is the ADD of a plugin that keeps a record per device (sriov,
// rdma, ib-sriov) while it holds the device (OpenAttach): the pod's and the
// host's netns, the device's lock, its failpoints, and from Begin on the
// device's record, which End rolls back when the ADD fails.
type Attach[R any] struct {
	*AddHold
	records vfrecord.Store[R]
	bdf     string
	fault   *netops.Failpoint
	rec     *R
	undo    func(hostNS, podNS ns.NetNS) error
}

// OpenAttach is OpenAddRecord of the device bdf for an ADD whose steps hit
// the failpoints of fault. On error nothing is held.
func OpenAttach[R any](netns string, records vfrecord.Store[R], bdf string, fault *netops.Failpoint, reclaim func(r *R, hostNS ns.NetNS) error) (*Attach[R], error) {
	h, err := OpenAddRecord(netns, records, bdf, reclaim)
	if err != nil {
		return nil, err
	}
	return &Attach[R]{AddHold: h, records: records, bdf: bdf, fault: fault}, nil
}

// Begin writes rec as the device's record before the ADD changes anything;
// from then on a failed ADD is undone by undo (the plugin's teardown of
// rec) and the record removed.
func (a *Attach[R]) Begin(rec *R, undo func(hostNS, podNS ns.NetNS) error) error {
	if err := a.records.Write(a.bdf, rec); err != nil {
		return err
	}
	a.rec, a.undo = rec, undo
	return nil
}

// Save writes the record again: what the ADD did so far, before it does
// the next thing.
func (a *Attach[R]) Save() error { return a.records.Write(a.bdf, a.rec) }

// Step hits the failpoint of the ADD step name (netops.EnvFault).
func (a *Attach[R]) Step(name string) error { return a.fault.Hit(name) }

// Finish is the end of an ADD whose interface is configured: the failpoint
// of the step that configured it (done) hit, result written into the
// record (into, its field) for CHECK and saved, the failpoint of that
// (recorded) hit.
func (a *Attach[R]) Finish(done string, into *json.RawMessage, result *current.Result, recorded string) error {
	if err := a.Step(done); err != nil {
		return err
	}
	b, err := json.Marshal(result)
	if err != nil {
		return fmt.Errorf("%s record: %w", a.records.Plugin, err)
	}
	*into = b
	if err := a.Save(); err != nil {
		return err
	}
	return a.Step(recorded)
}

// End, deferred by ADD with its (named) error, rolls back an ADD that
// fails after Begin (undo, then the record removed; what fails is added to
// *err, and a failed undo keeps the record for DEL), then releases what
// OpenAttach holds.
func (a *Attach[R]) End(err *error) {
	defer a.Close()
	if a.rec == nil || *err == nil {
		return
	}
	if rbErr := a.undo(a.HostNS, a.PodNS); rbErr != nil {
		*err = fmt.Errorf("%w; rollback also failed (the record %s is kept for DEL): %w", *err, a.records.Path(a.bdf), rbErr)
		return
	}
	if rmErr := a.records.Remove(a.bdf); rmErr != nil {
		*err = fmt.Errorf("%w; rollback: %w", *err, rmErr)
	}
}

// AddRecorded runs body, the ADD of the device bdf, while it holds the
// device (OpenAttach), and ends it (End) with body's error: a failed ADD is
// rolled back and returns no result.
func AddRecorded[R, T any](netns string, records vfrecord.Store[R], bdf string, fault *netops.Failpoint, reclaim func(r *R, hostNS ns.NetNS) error,
	body func(at *Attach[R]) (T, error)) (res T, err error) {
	at, err := OpenAttach(netns, records, bdf, fault, reclaim)
	if err != nil {
		return res, err
	}
	defer at.End(&err)
	if res, err = body(at); err != nil {
		var none T
		return none, err
	}
	return res, nil
}
