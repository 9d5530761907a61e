package fleetbench

import (
	"context"
	"fmt"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/rdmanet/rdmanet/internal/dra"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

// Flap is one device health flap on one node.
type Flap struct {
	Node, Device  string
	Changes       int   // device health changes (down, up)
	SliceWrites   int64 // the node's ResourceSlice writes
	Writes        int64 // every node's writes in the window
	ServerWrites  float64
	WritesByVerbs map[string]int64
	// Latencies: from each sysfs change to the node's slice saying so.
	Latencies []time.Duration
}

// flap takes one VF's RDMA port down and up again on a node that runs the
// real agent loop, waiting each time until its slice says so.
func flap(ctx context.Context, n *Node, adminCfg *rest.Config, adminCounter *Counter, admin kubernetes.Interface, sumNodes func() Counts) (Flap, error) {
	if !n.FullAgent() {
		return Flap{}, fmt.Errorf("flap: node %s does not run the agent loop", n.Name)
	}
	hw := n.o.Hardware
	bdf := sysfsfixture.VFBDF(hw.PFs[0].BDF, 0)
	ibdev := hw.RDMAByBD[bdf]
	dev := n.DeviceName(bdf)
	f := Flap{Node: n.Name, Device: dev}
	s0, err := ReadServerMetrics(ctx, adminCfg)
	if err != nil {
		return f, err
	}
	a0, c0, nodeC0 := adminCounter.Snapshot(), sumNodes(), n.Agent.Snapshot()
	for _, st := range []struct {
		state   string
		tainted bool
	}{{"1: DOWN", true}, {"4: ACTIVE", false}} {
		if err := hw.SetPortState(ibdev, st.state); err != nil {
			return f, err
		}
		t0 := time.Now()
		if err := waitTaint(ctx, admin, n.Name, dev, dra.TaintUnhealthy, st.tainted); err != nil {
			return f, err
		}
		f.Latencies = append(f.Latencies, time.Since(t0))
		f.Changes++
	}
	// What else the change may cause shows within the slice controller's
	// sync delay and a few agent rounds.
	if err := sleep(ctx, 5*time.Second); err != nil {
		return f, err
	}
	s1, err := ReadServerMetrics(ctx, adminCfg)
	if err != nil {
		return f, err
	}
	a1, c1 := adminCounter.Snapshot(), sumNodes()
	nodeC := n.Agent.Snapshot().Sub(nodeC0)
	f.SliceWrites = nodeC.Sum(func(k Key) bool { return IsWrite(k.Verb) && k.Resource == "resourceslices" })
	all := c1.Sub(c0)
	f.Writes = all.Writes()
	f.WritesByVerbs = map[string]int64{}
	for k, v := range all.Requests {
		if IsWrite(k.Verb) {
			f.WritesByVerbs[k.Verb+" "+k.Resource] += v
		}
	}
	f.ServerWrites = withoutAdmin(s1.Sub(s0), a1.Sub(a0)).Writes(nil)
	return f, nil
}

// waitTaint waits until device of node's slices has (or has not) taint key,
// for up to 5 minutes: on a starved simulator a request on a connection
// that died waits for the HTTP/2 health check (the agent's client sets no
// request timeout), which bench-fleet relaxes to 120 + 60 s.
func waitTaint(ctx context.Context, admin kubernetes.Interface, node, device, key string, want bool) error {
	const limit = 5 * time.Minute
	deadline := time.Now().Add(limit)
	for {
		sl, err := admin.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node + ",spec.driver=" + dra.DriverName})
		if err != nil {
			return err
		}
		if hasTaint(sl.Items, device, key) == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s device %s: taint %s present=%v not reached in %s", node, device, key, want, limit)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

func hasTaint(slices []resourcev1.ResourceSlice, device, key string) bool {
	for _, s := range slices {
		for _, d := range s.Spec.Devices {
			if d.Name != device {
				continue
			}
			for _, t := range d.Taints {
				if t.Key == key {
					return true
				}
			}
		}
	}
	return false
}
