// Package nsguard makes network-namespace callbacks safe to run inside a
// long-lived process (the rdmanet daemon runs rdmanet's own plugins
// in-process).
//
// ns.NetNS.Do runs its callback on a goroutine of its own (locked to a
// thread that enters the namespace). A panic there is beyond the reach of
// any recover on the caller's goroutine, so it kills the whole process —
// in the daemon, every pod's CNI calls on the node. Do catches such a panic
// on the callback's goroutine (after ns.Do's own cleanup has switched the
// thread back) and raises it again on the caller's goroutine as a *Panic
// that carries the original value and stack, where the per-request recover
// of the daemon (or inproc's per-plugin recover) turns it into a CNI error.
// In a plugin process nothing changes: the panic still ends the process,
// with the original stack in its message.
package nsguard

import (
	"fmt"
	"runtime/debug"

	"github.com/containernetworking/plugins/pkg/ns"
)

// Panic is a panic raised inside a namespace callback, re-raised on the
// goroutine that called Do.
type Panic struct {
	Value any
	// Stack is the callback goroutine's stack at the panic.
	Stack []byte
}

func (p *Panic) Error() string {
	return fmt.Sprintf("panic in a network namespace callback: %v", p.Value)
}

func (p *Panic) String() string { return p.Error() + "\n" + string(p.Stack) }

// Do is n.Do(fn) with fn's panics re-raised on the caller's goroutine.
func Do(n ns.NetNS, fn func(ns.NetNS) error) error {
	var caught *Panic
	err := n.Do(func(h ns.NetNS) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if p, ok := r.(*Panic); ok { // nested Do: keep the innermost stack
					caught = p
				} else {
					caught = &Panic{Value: r, Stack: debug.Stack()}
				}
				err = caught
			}
		}()
		return fn(h)
	})
	if caught != nil {
		panic(caught)
	}
	return err
}

// WithNetNSPath is ns.WithNetNSPath with fn's panics re-raised on the
// caller's goroutine.
func WithNetNSPath(path string, fn func(ns.NetNS) error) error {
	n, err := ns.GetNS(path)
	if err != nil {
		return err
	}
	defer n.Close()
	return Do(n, fn)
}

// guarded is a NetNS whose Do re-raises callback panics on the caller.
type guarded struct{ ns.NetNS }

func (g guarded) Do(fn func(ns.NetNS) error) error { return Do(g.NetNS, fn) }

// GetNS is ns.GetNS returning a NetNS whose Do is guarded.
func GetNS(path string) (ns.NetNS, error) {
	n, err := ns.GetNS(path)
	if err != nil {
		return nil, err
	}
	return Guard(n), nil
}

// GetCurrentNS is ns.GetCurrentNS returning a NetNS whose Do is guarded.
func GetCurrentNS() (ns.NetNS, error) {
	n, err := ns.GetCurrentNS()
	if err != nil {
		return nil, err
	}
	return Guard(n), nil
}

// Guard wraps n (nil stays nil; a guarded n is returned as it is).
func Guard(n ns.NetNS) ns.NetNS {
	if n == nil {
		return nil
	}
	if _, ok := n.(guarded); ok {
		return n
	}
	return guarded{n}
}
