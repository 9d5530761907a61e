package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/go-logr/logr"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/rdmanet/rdmanet/api/ipam/v1alpha1"
	"github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/internal/ipam/gc"
	"github.com/rdmanet/rdmanet/internal/ipam/ipamtest"
)

// pod builds a scheduled pod; opts change it.
func pod(phase corev1.PodPhase, opts ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: types.UID("u1")}}
	p.Spec.NodeName = "n1"
	p.Status.Phase = phase
	for _, o := range opts {
		o(p)
	}
	return p
}

func TestPodRelease(t *testing.T) {
	hostNet := func(p *corev1.Pod) { p.Spec.HostNetwork = true }
	unscheduled := func(p *corev1.Pod) { p.Spec.NodeName = "" }
	noUID := func(p *corev1.Pod) { p.UID = "" }
	deleting := func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }
	otherUID := func(p *corev1.Pod) { p.UID = "u2" }
	ref := gc.PodRef{Namespace: "ns", Name: "p", UID: "u1"}
	tests := []struct {
		name       string
		old, cur   *corev1.Pod
		deleted    bool
		wantReason string // "" = not released
	}{
		{name: "deleted running pod", cur: pod(corev1.PodRunning), deleted: true, wantReason: gc.ReasonPodGone},
		{name: "deleted terminal pod", cur: pod(corev1.PodSucceeded), deleted: true, wantReason: gc.ReasonPodGone},
		{name: "added running pod", cur: pod(corev1.PodRunning)},
		{name: "added pending pod", cur: pod(corev1.PodPending)},
		{name: "added succeeded pod (seen at start)", cur: pod(corev1.PodSucceeded), wantReason: gc.ReasonPodDone},
		{name: "added failed pod", cur: pod(corev1.PodFailed), wantReason: gc.ReasonPodDone},
		{name: "update: becomes failed", old: pod(corev1.PodRunning), cur: pod(corev1.PodFailed), wantReason: gc.ReasonPodDone},
		{name: "update: becomes succeeded", old: pod(corev1.PodRunning), cur: pod(corev1.PodSucceeded), wantReason: gc.ReasonPodDone},
		{name: "update: already terminal (resync)", old: pod(corev1.PodSucceeded), cur: pod(corev1.PodSucceeded)},
		{name: "update: terminal after a UID change", old: pod(corev1.PodSucceeded, otherUID), cur: pod(corev1.PodSucceeded), wantReason: gc.ReasonPodDone},
		{name: "update: still running", old: pod(corev1.PodRunning), cur: pod(corev1.PodRunning)},
		{name: "being deleted, sandbox still up", old: pod(corev1.PodRunning), cur: pod(corev1.PodRunning, deleting)},
		{name: "hostNetwork pod deleted: no address", cur: pod(corev1.PodRunning, hostNet), deleted: true},
		{name: "hostNetwork pod terminal", cur: pod(corev1.PodFailed, hostNet)},
		{name: "never scheduled, deleted", cur: pod(corev1.PodPending, unscheduled), deleted: true},
		{name: "no UID", cur: pod(corev1.PodFailed, noUID), deleted: true},
		{name: "nil pod (not a pod)", cur: nil, deleted: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, reason, ok := podRelease(tc.old, tc.cur, tc.deleted)
			if ok != (tc.wantReason != "") || reason != tc.wantReason {
				t.Fatalf("podRelease = %v, %q, %t; want reason %q", got, reason, ok, tc.wantReason)
			}
			if ok && got != ref {
				t.Errorf("podRelease ref = %+v, want %+v", got, ref)
			}
		})
	}
}

func TestPodOf(t *testing.T) {
	p := pod(corev1.PodRunning)
	tests := []struct {
		name string
		obj  any
		want *corev1.Pod
	}{
		{name: "pod", obj: p, want: p},
		{name: "tombstone", obj: toolscache.DeletedFinalStateUnknown{Key: "ns/p", Obj: p}, want: p},
		{name: "tombstone of something else", obj: toolscache.DeletedFinalStateUnknown{Key: "x", Obj: &corev1.Node{}}},
		{name: "not a pod", obj: &corev1.Node{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := podOf(tc.obj); got != tc.want {
				t.Errorf("podOf = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestStripObject(t *testing.T) {
	p := pod(corev1.PodRunning)
	p.Annotations = map[string]string{"big": "x"}
	p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m"}}
	p.Spec.Containers = []corev1.Container{{Name: "c"}}
	p.Spec.HostNetwork = true
	out, err := stripObject(p)
	if err != nil {
		t.Fatal(err)
	}
	s := out.(*corev1.Pod)
	if s.UID != p.UID || s.Name != p.Name || s.Namespace != p.Namespace || s.Spec.NodeName != "n1" || !s.Spec.HostNetwork || s.Status.Phase != corev1.PodRunning {
		t.Errorf("stripped pod lost what GC reads: %+v", s)
	}
	if s.Annotations != nil || s.ManagedFields != nil || s.Spec.Containers != nil {
		t.Errorf("stripped pod keeps what GC does not read: %+v", s)
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "b"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}}
	out, err = stripObject(n)
	if err != nil {
		t.Fatal(err)
	}
	if sn := out.(*corev1.Node); sn.ManagedFields != nil || sn.Labels["a"] != "b" {
		t.Errorf("node: managedFields kept or labels lost: %+v", sn)
	}
}

// flakyStore fails List while fail is set.
type flakyStore struct {
	ipam.Store
	fail bool
}

func (s *flakyStore) List(ctx context.Context, p ipam.Pool, node string) ([]v1alpha1.IPAMBlock, error) {
	if s.fail {
		return nil, fmt.Errorf("list: %w", ipam.ErrTransient)
	}
	return s.Store.List(ctx, p, node)
}

// fakeCluster answers Pods and Nodes (default: node n1), or fails.
type fakeCluster struct {
	pods  map[string]gc.Pod
	nodes []string
	err   error
}

func (c fakeCluster) Pods(context.Context) (map[string]gc.Pod, error) { return c.pods, c.err }
func (c fakeCluster) Nodes(context.Context) (map[string]bool, error) {
	if c.err != nil {
		return nil, c.err
	}
	if c.nodes == nil {
		return map[string]bool{"n1": true}, nil
	}
	m := map[string]bool{}
	for _, n := range c.nodes {
		m[n] = true
	}
	return m, nil
}

// allocated returns a store holding one allocation per owner, created at.
func allocated(t *testing.T, at time.Time, owners ...ipam.Owner) *flakyStore {
	t.Helper()
	cfg, err := ipam.Parse([]byte(`{"cniVersion":"1.0.0","name":"t","ipam":{"range":"10.92.0.0/24","node_slice_size":"/28"}}`), ipam.Env{})
	if err != nil {
		t.Fatal(err)
	}
	store := &flakyStore{Store: &ipam.LocalStore{Dir: t.TempDir()}}
	al := &ipam.Allocator{Store: store.Store, Node: "n1", Lock: &ipam.FileLock{Dir: t.TempDir()}, Now: func() time.Time { return at }}
	for _, o := range owners {
		if _, err := al.Allocate(context.Background(), cfg.Network, cfg.Ranges[0], o); err != nil {
			t.Fatal(err)
		}
	}
	return store
}

func holders(t *testing.T, s ipam.Store) []string {
	t.Helper()
	var out []string
	for _, a := range ipamtest.StoreAllocations(t, context.Background(), s, ipam.Pool{}) {
		out = append(out, a.PodName)
	}
	sort.Strings(out)
	return out
}

// TestReleaseQueuedRetries: a failed pass releases nothing and keeps the
// batch queued; the next pass releases it.
func TestReleaseQueuedRetries(t *testing.T) {
	gone, live := ipamtest.Owner("n1", 1), ipamtest.Owner("n1", 2)
	store := allocated(t, time.Now(), gone, live)
	store.fail = true
	g := &IPAMGC{Store: store, Log: logr.Discard(), pending: map[gc.PodRef]queued{}, kick: make(chan struct{}, 1)}
	deleted := pod(corev1.PodRunning, func(p *corev1.Pod) { p.Name, p.UID = gone.PodName, types.UID(gone.PodUID) })
	g.enqueue(nil, deleted, true)
	if err := g.releaseQueued(context.Background()); !errors.Is(err, ipam.ErrTransient) {
		t.Fatalf("releaseQueued with the store down: %v, want ErrTransient", err)
	}
	if got := holders(t, store.Store); fmt.Sprint(got) != fmt.Sprint([]string{gone.PodName, live.PodName}) {
		t.Fatalf("after a failed pass the store holds %v, want both", got)
	}
	if len(g.pending) != 1 {
		t.Fatalf("after a failed pass %d pods are queued, want 1", len(g.pending))
	}
	store.fail = false
	if err := g.releaseQueued(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := holders(t, store.Store); fmt.Sprint(got) != fmt.Sprint([]string{live.PodName}) {
		t.Errorf("after the retry the store holds %v, want only %s", got, live.PodName)
	}
	if len(g.pending) != 0 {
		t.Errorf("%d pods still queued after a successful pass", len(g.pending))
	}
}

// TestSweep: the sweep applies gc.Run's rules and grace and fails closed.
func TestSweep(t *testing.T) {
	old, young := ipamtest.Owner("n1", 1), ipamtest.Owner("n1", 2)
	live := ipamtest.Owner("n1", 3)
	livePods := map[string]gc.Pod{live.PodNamespace + "/" + live.PodName: {UID: live.PodUID}}
	tests := []struct {
		name    string
		cluster fakeCluster
		want    []string // pods still holding an address
	}{
		{name: "old allocation of a missing pod released, young one kept", cluster: fakeCluster{pods: livePods}, want: []string{young.PodName, live.PodName}},
		{name: "pod list unreadable: nothing released", cluster: fakeCluster{err: errors.New("forbidden")}, want: []string{old.PodName, young.PodName, live.PodName}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store := allocated(t, time.Now().Add(-time.Hour), old, live)
			al := &ipam.Allocator{Store: store.Store, Node: "n1", Lock: &ipam.FileLock{Dir: t.TempDir()}, Now: time.Now}
			cfg, _ := ipam.Parse([]byte(`{"cniVersion":"1.0.0","name":"t","ipam":{"range":"10.92.0.0/24","node_slice_size":"/28"}}`), ipam.Env{})
			if _, err := al.Allocate(context.Background(), cfg.Network, cfg.Ranges[0], young); err != nil {
				t.Fatal(err)
			}
			g := &IPAMGC{Store: store, Cluster: tc.cluster, Log: logr.Discard()}
			g.sweep(context.Background())
			want := slices.Clone(tc.want)
			sort.Strings(want)
			if got := holders(t, store.Store); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("after the sweep the store holds %v, want %v", got, want)
			}
		})
	}
}

// TestNodeQuarantine: the pods bound to a Node that stayed deleted through
// the quarantine are queued for release with ReasonPodNodeGone; a Node that
// came back, an unreadable node list, and pods of other nodes, terminal or
// hostNetwork pods are not.
func TestNodeQuarantine(t *testing.T) {
	onN1 := pod(corev1.PodRunning)
	onN1b := pod(corev1.PodPending, func(p *corev1.Pod) { p.Name, p.UID = "p2", "u2" })
	onN2 := pod(corev1.PodRunning, func(p *corev1.Pod) { p.Name, p.UID, p.Spec.NodeName = "p3", "u3", "n2" })
	done := pod(corev1.PodSucceeded, func(p *corev1.Pod) { p.Name, p.UID = "p4", "u4" })
	hostNet := pod(corev1.PodRunning, func(p *corev1.Pod) { p.Name, p.UID, p.Spec.HostNetwork = "p5", "u5", true })
	gone := pod(corev1.PodRunning, func(p *corev1.Pod) { p.Name, p.UID = "p6", "u6" })
	tests := []struct {
		name    string
		cluster fakeCluster
		want    []string // queued pod names, sorted
	}{
		{name: "node still gone: its live pods queued", cluster: fakeCluster{nodes: []string{"n2"}}, want: []string{"p", "p2"}},
		{name: "node back: nothing queued", cluster: fakeCluster{nodes: []string{"n1", "n2"}}},
		{name: "node list unreadable: nothing queued (fail closed)", cluster: fakeCluster{err: errors.New("forbidden")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := &IPAMGC{Cluster: tc.cluster, Log: logr.Discard(), pending: map[gc.PodRef]queued{}, kick: make(chan struct{}, 1)}
			for _, p := range []*corev1.Pod{onN1, onN1b, onN2, done, hostNet, gone} {
				g.enqueue(nil, p, false)
			}
			g.enqueue(nil, gone, true) // deleted before the node went: released as gone, not tracked
			delete(g.pending, gc.PodRef{Namespace: "ns", Name: "p6", UID: "u6"})
			delete(g.pending, gc.PodRef{Namespace: "ns", Name: "p4", UID: "u4"}) // terminal: queued as done already
			ctx, cancel := context.WithCancel(context.Background())
			g.nodeQuarantineOver(ctx, "n1", time.Now())
			cancel() // stops the fail-closed retry
			var got []string
			for ref, q := range g.pending {
				if q.reason != gc.ReasonPodNodeGone {
					t.Errorf("%s queued with %q, want %q", ref.Name, q.reason, gc.ReasonPodNodeGone)
				}
				got = append(got, ref.Name)
			}
			sort.Strings(got)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("queued %v, want %v", got, tc.want)
			}
		})
	}
}

// TestQuarantineMissing: a replica that starts leading quarantines the
// nodes its pods are on that no longer exist (their deletion happened
// while no replica led, so no event comes), and after the quarantine
// queues their pods; nodes that exist, and an unreadable node list, start
// nothing.
func TestQuarantineMissing(t *testing.T) {
	onN1 := pod(corev1.PodRunning)
	onN2 := pod(corev1.PodRunning, func(p *corev1.Pod) { p.Name, p.UID, p.Spec.NodeName = "p3", "u3", "n2" })
	tests := []struct {
		name    string
		cluster fakeCluster
		want    []string // queued after the quarantine, sorted
	}{
		{name: "n1 deleted before this replica led: its pod queued", cluster: fakeCluster{nodes: []string{"n2"}}, want: []string{"p"}},
		{name: "both nodes exist: nothing queued", cluster: fakeCluster{nodes: []string{"n1", "n2"}}},
		{name: "node list unreadable: nothing queued (fail closed)", cluster: fakeCluster{err: errors.New("forbidden")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := &IPAMGC{Cluster: tc.cluster, Log: logr.Discard(), NodeQuarantine: time.Millisecond,
				pending: map[gc.PodRef]queued{}, kick: make(chan struct{}, 1)}
			for _, p := range []*corev1.Pod{onN1, onN2} {
				g.enqueue(nil, p, false)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			g.quarantineMissing(ctx)
			queued := func() []string {
				g.mu.Lock()
				defer g.mu.Unlock()
				var names []string
				for ref := range g.pending {
					names = append(names, ref.Name)
				}
				return names
			}
			for deadline := time.Now().Add(5 * time.Second); len(queued()) < len(tc.want) && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond) // the quarantine (1 ms) is over: nothing more arrives
			got := queued()
			sort.Strings(got)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("queued %v, want %v", got, tc.want)
			}
		})
	}
}
