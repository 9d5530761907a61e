package controller_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rdmanet/rdmanet/internal/controller"
	"github.com/rdmanet/rdmanet/internal/devinfo"
	"github.com/rdmanet/rdmanet/internal/guidpool"
	"github.com/rdmanet/rdmanet/internal/ipam"
)

// guidHookScript is a subnet-manager hook: it appends its arguments and
// the GC's release reason to $0.log and fails while $0.fail exists.
const guidHookScript = `#!/bin/sh
echo "$* reason=$RDMANET_RELEASE_REASON node=$RDMANET_NODE network=$RDMANET_NETWORK" >> "$0.log"
if [ -e "$0.fail" ]; then echo "fabric manager unreachable" >&2; exit 3; fi
`

// ibNetworkStatus is the network-status the meta CNI writes for a pod on
// an ib-sriov network (with rdmanet's "infiniband" extension).
func ibNetworkStatus(t *testing.T, guid guidpool.GUID) string {
	t.Helper()
	conf := `{"cniVersion":"0.3.1","name":"ib-training","plugins":[{"type":"ib-sriov","pkey":"0x8005","link_state":"enable"},{"type":"rdma"}]}`
	st := []devinfo.NetworkStatus{
		{NetworkStatus: nadv1.NetworkStatus{Name: "k8s-pod-network", Interface: "eth0", IPs: []string{"10.244.1.7"}, Default: true}},
		{NetworkStatus: nadv1.NetworkStatus{Name: "ai-training/ib-training", Interface: "net1", Mac: guid.String(), DeviceInfo: devinfo.PCI("0000:c1:00.2", "", "mlx5_5")},
			InfiniBand: devinfo.InfiniBandOf([]byte(conf), guid.String())},
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestGUIDHookOnGC: when the IPAM GC frees the GUID of a gone pod, the GUID
// pool's hook (a real process, configured with --guid-pool-config) runs
// once with the release event: the GUID, the PKey from the pod's
// network-status, the pod. A failing hook keeps the GUID allocated (fail
// closed), with a Warning Event on the node, and is retried until it
// succeeds; only then is the GUID free.
func TestGUIDHookOnGC(t *testing.T) {
	e := setup(t)
	ns := newNamespace(t, e)
	const node = "ib-node-a"
	dir := t.TempDir()
	hook := filepath.Join(dir, "sm-hook.sh")
	if err := os.WriteFile(hook, []byte(guidHookScript), 0o755); err != nil {
		t.Fatal(err)
	}
	poolName := uniq("gc-hook")
	confPath := filepath.Join(dir, "guid-pool.json")
	conf := fmt.Sprintf(`{"name":%q,"ranges":[{"start":"02:00:00:00:00:00:00:01","end":"02:00:00:00:00:00:00:40"}],"blockSize":8,"hook":[%q],"hookTimeout":"20s"}`, poolName, hook)
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := guidpool.Parse(confPath, []byte(conf))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store.Path = filepath.Join(dir, "node-store")
	pool := guidpool.New(cfg, e.store, node)

	// Two IB pods with GUIDs from the pool and their network-status.
	owner := func(p *corev1.Pod) ipam.Owner {
		return ipam.Owner{ContainerID: "sandbox-" + string(p.UID), IfName: "net1", PodNamespace: p.Namespace, PodName: p.Name, PodUID: string(p.UID)}
	}
	guidOf := map[string]guidpool.GUID{}
	pods := map[string]*corev1.Pod{}
	for _, name := range []string{"ib-trainer-0", "ib-trainer-1"} {
		p := createPod(t, e, ns, name, node)
		g, err := pool.Allocate(context.Background(), owner(p))
		if err != nil {
			t.Fatal(err)
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{"k8s.v1.cni.cncf.io/network-status": ibNetworkStatus(t, g)}}})
		if _, err := e.admin.CoreV1().Pods(ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		guidOf[name], pods[name] = g, p
	}
	r := start(t, e, "guid-hook", func(o *controller.Options) { o.GUIDPoolConfigs = []string{confPath} })
	r.waitWatching(t)

	hookLines := func(g guidpool.GUID) []string {
		b, _ := os.ReadFile(hook + ".log")
		var out []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, g.String()) {
				out = append(out, l)
			}
		}
		return out
	}
	held := func(p *corev1.Pod) bool {
		_, err := pool.Lookup(context.Background(), owner(p))
		if err != nil && !errors.Is(err, ipam.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(45 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 45 s; hook log:\n%s", what, readFile(hook+".log"))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// (a) a deleted pod's GUID: the hook runs once, with GUID and PKey, then the GUID is free.
	p0, g0 := pods["ib-trainer-0"], guidOf["ib-trainer-0"]
	deleteNow(t, e, p0)
	waitFor("GUID of the deleted pod released", func() bool { return !held(p0) })
	want := fmt.Sprintf("release %s 0x8005 %s/%s reason=pod no longer exists node=%s network=ai-training/ib-training", g0, ns, p0.Name, node)
	if got := hookLines(g0); len(got) != 1 || got[0] != want {
		t.Fatalf("hook runs for %s: %q, want exactly [%q]", g0, got, want)
	}

	// (b) the hook fails: the GUID stays allocated to the gone pod, a
	// Warning Event names it; once the hook succeeds the GUID is free.
	if err := os.WriteFile(hook+".fail", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p1, g1 := pods["ib-trainer-1"], guidOf["ib-trainer-1"]
	deleteNow(t, e, p1)
	waitFor("two failed hook runs (a retry)", func() bool { return len(hookLines(g1)) >= 2 })
	if !held(p1) {
		t.Fatalf("GUID %s freed although the hook failed", g1)
	}
	waitFor("Warning Event on the node", func() bool {
		evs, err := e.admin.EventsV1().Events(metav1.NamespaceAll).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs.Items {
			if ev.Reason == "GUIDReleaseHookFailed" && ev.Regarding.Name == node && strings.Contains(ev.Note, g1.String()) && ev.Type == corev1.EventTypeWarning {
				return true
			}
		}
		return false
	})
	if err := os.Remove(hook + ".fail"); err != nil {
		t.Fatal(err)
	}
	waitFor("GUID released once the hook succeeds", func() bool { return !held(p1) })
	lines := hookLines(g1)
	want = fmt.Sprintf("release %s 0x8005 %s/%s reason=pod no longer exists node=%s network=ai-training/ib-training", g1, ns, p1.Name, node)
	for _, l := range lines {
		if l != want {
			t.Errorf("hook run %q, want %q", l, want)
		}
	}
	if !strings.Contains(r.logs.String(), "GUID pool hook failed") {
		t.Error("the failed hook is not logged")
	}
	t.Logf("failing hook: %d runs until it succeeded", len(lines))
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}
