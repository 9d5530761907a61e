package dra

import (
	"context"
	"log/slog"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

// TestRescanKeepsOneCopy: the agent hands the publisher a fresh discovery
// on every rescan. An unchanged one publishes nothing new and leaves the
// publisher holding one list of devices (the published one), not a copy
// per rescan beside it; a changed one (a VF's RDMA port down) is published
// and becomes the one list held.
func TestRescanKeepsOneCopy(t *testing.T) {
	s := fixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pub, err := NewPublisher(PublisherOptions{Client: fake.NewClientset(), NodeName: testNode, SysfsRoot: s.Root, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	pub.Start(ctx)
	defer pub.Stop()
	update := func() {
		t.Helper()
		node, pools := nodeState(t, s.Root, "", cfgAll) // a fresh discovery, as each rescan is
		if err := pub.Update(node, pools); err != nil {
			t.Fatal(err)
		}
	}
	held := func() (base, last []resourceapi.Device) {
		pub.mu.Lock()
		defer pub.mu.Unlock()
		return pub.base, pub.last
	}
	update()
	first := pub.Published()
	if len(first) == 0 {
		t.Fatal("nothing published")
	}
	for i := range 3 {
		update()
		base, last := held()
		if &last[0] != &first[0] {
			t.Fatalf("rescan %d: an unchanged discovery replaced the published devices", i+1)
		}
		if &base[0] != &first[0] {
			t.Fatalf("rescan %d: the publisher holds the rescan's devices beside the published ones (two copies)", i+1)
		}
	}

	if err := s.SetPortState(s.RDMAByBD[sysfsfixture.VFBDF(s.RoCE.BDF, 1)], "1: DOWN"); err != nil {
		t.Fatal(err)
	}
	update()
	base, last := held()
	if &last[0] == &first[0] || tainted(last) != 1 {
		t.Fatalf("a VF's port went down: published %d tainted devices (same list as before: %v), want 1 in a new list", tainted(last), &last[0] == &first[0])
	}
	if &base[0] != &last[0] {
		t.Fatal("after a change the publisher holds two lists of devices")
	}
}
