package fleetbench

import (
	"context"
	"time"

	"k8s.io/client-go/rest"
)

// Window is the steady state.
type Window struct {
	Duration time.Duration
	// Client side, summed over the nodes' processes.
	Node Counts
	// Server side, less the benchmark's own requests.
	Server ServerMetrics
	// Open watches at the end: the nodes' (client side) and the server's
	// apiserver_longrunning_requests{verb="WATCH"}.
	NodeWatches   int64
	ServerWatches float64
	// WritesByNode: nodes that wrote in the window (name -> writes).
	WritesByNode map[string]int64
}

// steady measures the steady state: o.Steady with nothing changing, after
// the fleet settled.
func steady(ctx context.Context, o Options, nodes []*Node, adminCfg *rest.Config, adminCounter *Counter,
	sumNodes func() Counts, perNode func() map[string]Counts, pr func(string, ...any)) (Window, error) {
	pr("steady window of %s", o.Steady)
	s0, err := ReadServerMetrics(ctx, adminCfg)
	if err != nil {
		return Window{}, err
	}
	a0, c0, p0 := adminCounter.Snapshot(), sumNodes(), perNode()
	if err := sleep(ctx, o.Steady); err != nil {
		return Window{}, err
	}
	s1, err := ReadServerMetrics(ctx, adminCfg)
	if err != nil {
		return Window{}, err
	}
	a1, c1, p1 := adminCounter.Snapshot(), sumNodes(), perNode()
	w := Window{Duration: o.Steady, Node: c1.Sub(c0), Server: withoutAdmin(s1.Sub(s0), a1.Sub(a0)), ServerWatches: s1.OpenWatches(), WritesByNode: map[string]int64{}}
	for _, n := range nodes {
		w.NodeWatches += n.Agent.WatchesOpen() + n.Daemon.WatchesOpen()
		if nw := p1[n.Name].Sub(p0[n.Name]).Writes(); nw > 0 {
			w.WritesByNode[n.Name] = nw
		}
	}
	pr("steady: node requests %d, writes %d, bytes in %d; server writes %.0f; watches node %d server %.0f",
		w.Node.Sum(func(Key) bool { return true }), w.Node.Writes(), w.Node.BytesIn, w.Server.Writes(nil), w.NodeWatches, w.ServerWatches)
	return w, nil
}
