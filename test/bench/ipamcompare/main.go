// Command ipam-compare measures exec'd IPAM plugins side by side on one
// real kube-apiserver + etcd (test/apiserver), driven as a runtime drives
// them (one exec per call, CNI_* environment, config on stdin; package
// test/ipamload): N ADDs at concurrency C over K node identities, then DEL
// of all. Rows, in one run and on the same server:
//
//	whereabouts      Whereabouts v0.9.2 (hack/build-whereabouts.sh), its kubernetes datastore
//	rdmanet-direct   rdmanet-ipam with no daemon: each exec does the whole call (rdmanet-ipam-direct)
//	rdmanet-daemon   rdmanet-ipam as a thin client of rdmanet-daemon, one daemon per node identity
//
// One line per row:
//
//	ipam-compare: plugin=… adds=1000 nodes=10 concurrency=10 add_wall_s=… add_p50_ms=… add_p99_ms=… api_requests_per_add=… del_wall_s=… api_requests_per_del=… failed=0 duplicates=0 leftovers=0
//
// and one ratio line per rdmanet row against Whereabouts. API requests are
// the server's apiserver_request_total over the phase (its own background
// requests included: a few per minute). Run it with `make bench-ipam-compare`
// (root: the daemon serves ADDs only for a pod network namespace).
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/containernetworking/plugins/pkg/testutils"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/test/apiserver"
	"github.com/rdmanet/rdmanet/test/ipamload"
	"github.com/rdmanet/rdmanet/test/plugindaemon"
)

func main() {
	o := opts{}
	flag.IntVar(&o.adds, "adds", 1000, "ADDs per plugin (then as many DELs)")
	flag.IntVar(&o.nodes, "nodes", 10, "node identities")
	flag.IntVar(&o.conc, "concurrency", 10, "calls at once")
	flag.IntVar(&o.serial, "serial", 200, "rdmanet-daemon row: ADDs (then DELs) one at a time after the concurrent run, for the forwarding binary's own cost; 0 skips")
	flag.StringVar(&o.cidr, "range", "10.100.0.0/16", "range every plugin allocates from")
	flag.StringVar(&o.bin, "bin", "", "directory with rdmanet-ipam, rdmanet-ipam-direct and rdmanet-daemon of one VCS-stamped build (required)")
	flag.StringVar(&o.whereabouts, "whereabouts", ".tools/bin/whereabouts", "the Whereabouts plugin binary")
	flag.StringVar(&o.crds, "whereabouts-crds", ".tools/whereabouts-crds", "Whereabouts' CRD manifests")
	flag.StringVar(&o.rows, "plugins", "whereabouts,rdmanet-direct,rdmanet-daemon", "rows to run, in this order")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "ipam-compare:", err)
		os.Exit(1)
	}
}

type opts struct {
	adds, nodes, conc, serial          int
	cidr, bin, whereabouts, crds, rows string
}

type row struct {
	name string
	// daemon rows: the daemon's own time per ADD and the rest of each
	// call's latency (the forwarding binary's start, request and answer)
	daemonP50, overheadP50, overheadP99 time.Duration
	// the same, with the daemon row's ADDs one at a time (-serial): the
	// thin binary's own cost without waiting for a core behind other calls
	serialDaemonP50, serialOverheadP50, serialOverheadP99 time.Duration
	// CPU time of the ADD phase: plugin processes, and by server process
	cpu                          map[string]time.Duration
	add, del                     ipamload.Run
	addRequests, delRequests     int64
	failed, duplicates, leftover int
}

func run(o opts) error {
	if o.bin == "" {
		return fmt.Errorf("-bin is required")
	}
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "ipam-compare-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	progress("starting etcd + kube-apiserver")
	srv, err := apiserver.Start(ctx)
	if err != nil {
		return err
	}
	defer srv.Stop()
	if err := srv.ApplyCRDs(ctx); err != nil {
		return err
	}
	if strings.Contains(o.rows, "whereabouts") {
		if err := apiserver.ApplyCRDFiles(ctx, srv.Config(), o.crds); err != nil {
			return fmt.Errorf("whereabouts CRDs from %s: %w", o.crds, err)
		}
	}
	kubeconfig := filepath.Join(tmp, "kubeconfig")
	if err := srv.WriteKubeconfig(kubeconfig); err != nil {
		return err
	}
	pod, err := testutils.NewNS()
	if err != nil {
		return fmt.Errorf("pod network namespace (run as root): %w", err)
	}
	defer func() { _ = pod.Close(); _ = testutils.UnmountNS(pod) }()

	var rows []row
	for _, name := range strings.Split(o.rows, ",") {
		r, err := runRow(ctx, o, srv, strings.TrimSpace(name), tmp, kubeconfig, pod.Path())
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		rows = append(rows, r)
	}
	var base *row
	for i := range rows {
		if rows[i].name == "whereabouts" {
			base = &rows[i]
		}
	}
	bad := 0
	for _, r := range rows {
		fmt.Printf("ipam-compare: plugin=%s adds=%d nodes=%d concurrency=%d add_wall_s=%.2f add_p50_ms=%.1f add_p99_ms=%.1f api_requests_per_add=%.2f del_wall_s=%.2f api_requests_per_del=%.2f failed=%d duplicates=%d leftovers=%d\n",
			r.name, o.adds, o.nodes, o.conc, r.add.Wall.Seconds(), ms(r.add.Pct(50)), ms(r.add.Pct(99)), float64(r.addRequests)/float64(o.adds),
			r.del.Wall.Seconds(), float64(r.delRequests)/float64(o.adds), r.failed, r.duplicates, r.leftover)
		if r.name == "rdmanet-daemon" {
			fmt.Printf("ipam-compare: plugin=%s add_daemon_p50_ms=%.1f forwarding_cost_p50_ms=%.1f forwarding_cost_p99_ms=%.1f (ADD latency less the daemon's own time: the thin binary's start, request and answer)\n",
				r.name, ms(r.daemonP50), ms(r.overheadP50), ms(r.overheadP99))
			if o.serial > 0 {
				fmt.Printf("ipam-compare: plugin=%s serial_adds=%d add_daemon_p50_ms=%.1f forwarding_cost_alone_p50_ms=%.1f forwarding_cost_alone_p99_ms=%.1f (one call at a time: the thin binary's own start, request and answer)\n",
					r.name, o.serial, ms(r.serialDaemonP50), ms(r.serialOverheadP50), ms(r.serialOverheadP99))
			}
		}
		if r.failed+r.duplicates+r.leftover > 0 && r.name != "whereabouts" {
			bad++
		}
	}
	for _, r := range rows {
		per := func(k string) float64 { return ms(r.cpu[k]) / float64(o.adds) }
		fmt.Printf("ipam-compare: plugin=%s cpu_ms_per_add plugin_processes=%.1f daemons=%.1f kube_apiserver=%.1f etcd=%.1f\n",
			r.name, per("plugins"), per("rdmanet-daemon"), per("kube-apiserver"), per("etcd"))
	}
	for _, r := range rows {
		if base == nil || r.name == base.name {
			continue
		}
		fmt.Printf("ipam-compare: %s_vs_whereabouts add_wall_speedup=%.1fx add_p50_speedup=%.1fx add_p99_speedup=%.1fx del_wall_speedup=%.1fx\n",
			r.name, base.add.Wall.Seconds()/r.add.Wall.Seconds(), ms(base.add.Pct(50))/ms(r.add.Pct(50)), ms(base.add.Pct(99))/ms(r.add.Pct(99)),
			base.del.Wall.Seconds()/r.del.Wall.Seconds())
	}
	if bad > 0 {
		return fmt.Errorf("%d rdmanet rows failed calls, handed out an address twice or left addresses behind", bad)
	}
	return nil
}

func runRow(ctx context.Context, o opts, srv *apiserver.Server, name, tmp, kubeconfig, netns string) (row, error) {
	r := row{name: name}
	l := &ipamload.Load{Netns: netns, Prefix: name}
	network := "cmp-" + name
	switch name {
	case "whereabouts":
		// its flat file (as installed upstream): the kubernetes datastore
		flat := fmt.Sprintf(`{"datastore":"kubernetes","kubernetes":{"kubeconfig":%q}}`, kubeconfig)
		if err := os.WriteFile(filepath.Join(tmp, "whereabouts.conf"), []byte(flat), 0o600); err != nil {
			return r, err
		}
		l.Bin, l.CNIPath = o.whereabouts, filepath.Dir(o.whereabouts)
		l.Config = []byte(fmt.Sprintf(`{"cniVersion":"0.3.1","name":%q,"ipam":{"type":"whereabouts","range":%q,"network_name":%q,"kubernetes":{"kubeconfig":%q},"configuration_path":%q}}`,
			network, o.cidr, network, kubeconfig, filepath.Join(tmp, "whereabouts.conf")))
		for n := range o.nodes {
			node := fmt.Sprintf("node-%02d", n)
			l.Nodes = append(l.Nodes, ipamload.Node{Name: node, Env: []string{"NODENAME=" + node}})
		}
	case "rdmanet-direct", "rdmanet-daemon":
		l.Bin, l.CNIPath = filepath.Join(o.bin, "rdmanet-ipam"), o.bin
		l.Config = []byte(fmt.Sprintf(`{"cniVersion":"1.0.0","name":%q,"ipam":{"type":"rdmanet-ipam","range":%q,"network_name":%q,"store":{"type":"kubernetes","kubeconfig":%q}}}`,
			network, o.cidr, network, kubeconfig))
		for n := range o.nodes {
			node := fmt.Sprintf("node-%02d", n)
			sock := "off"
			if name == "rdmanet-daemon" {
				sock = filepath.Join(tmp, name, node, "plugins.sock")
				d, err := plugindaemon.Start(o.bin, sock, filepath.Join(tmp, name, node+".log"), nil)
				if err != nil {
					return r, err
				}
				defer d.Stop(os.Interrupt)
			}
			l.Nodes = append(l.Nodes, ipamload.Node{Name: node, Env: []string{"NODENAME=" + node, "RDMANET_PLUGIN_SOCKET=" + sock,
				"RDMANET_IPAM_STORE_PATH=" + filepath.Join(tmp, name, node, "ipam")}})
		}
	default:
		return r, fmt.Errorf("unknown row (want whereabouts, rdmanet-direct or rdmanet-daemon)")
	}
	// one untimed call first: CRD storage, watch caches and connections warm
	warm := *l
	warm.Prefix = name + "-warm"
	if w := warm.Do(ctx, "ADD", 1, 1); w.Errs[0] != nil {
		return r, fmt.Errorf("warm-up ADD: %w", w.Errs[0])
	}
	if w := warm.Do(ctx, "DEL", 1, 1); w.Errs[0] != nil {
		return r, fmt.Errorf("warm-up DEL: %w", w.Errs[0])
	}

	progress(fmt.Sprintf("%s: %d ADDs, %d at a time, over %d nodes", name, o.adds, o.conc, o.nodes))
	k0, err := apiserver.Requests(ctx, srv.Config())
	if err != nil {
		return r, err
	}
	c0 := procCPU()
	r.add = l.Do(ctx, "ADD", o.adds, o.conc)
	c1 := procCPU()
	r.cpu = map[string]time.Duration{"plugins": r.add.CPUTotal()}
	for k, v := range c1 {
		r.cpu[k] = v - c0[k]
	}
	k1, err := apiserver.Requests(ctx, srv.Config())
	if err != nil {
		return r, err
	}
	failed, first := r.add.Failed()
	if first != nil {
		progress(fmt.Sprintf("%s: %d ADDs failed; first: %v", name, failed, first))
	}
	r.failed, r.duplicates = failed, r.add.Duplicates()
	if name == "rdmanet-daemon" {
		if r.daemonP50, r.overheadP50, r.overheadP99, err = forwardingCost(l, r.add, filepath.Join(tmp, name)); err != nil {
			return r, err
		}
	}
	progress(fmt.Sprintf("%s: ADDs took %.1fs; %d DELs", name, r.add.Wall.Seconds(), o.adds))
	r.del = l.Do(ctx, "DEL", o.adds, o.conc)
	k2, err := apiserver.Requests(ctx, srv.Config())
	if err != nil {
		return r, err
	}
	if dfailed, first := r.del.Failed(); first != nil {
		progress(fmt.Sprintf("%s: %d DELs failed; first: %v", name, dfailed, first))
		r.failed += dfailed
	}
	r.addRequests, r.delRequests = apiserver.Total(k1)-apiserver.Total(k0), apiserver.Total(k2)-apiserver.Total(k1)
	if r.leftover, err = leftovers(ctx, srv, name, network, o.cidr); err != nil {
		return r, err
	}
	progress(fmt.Sprintf("%s: DELs took %.1fs", name, r.del.Wall.Seconds()))
	if name == "rdmanet-daemon" && o.serial > 0 {
		if err := serialCost(ctx, &r, l, o.serial, filepath.Join(tmp, name)); err != nil {
			return r, err
		}
	}
	return r, nil
}

// serialCost runs n ADDs through the daemons one at a time and reads the
// forwarding cost of each (its latency less the daemon's own time), then
// DELs them; a failure or duplicate counts in the row.
func serialCost(ctx context.Context, r *row, l *ipamload.Load, n int, logDir string) error {
	progress(fmt.Sprintf("rdmanet-daemon: %d ADDs one at a time (the forwarding binary's own cost)", n))
	s := *l
	s.Prefix = l.Prefix + "-serial"
	add := s.Do(ctx, "ADD", n, 1)
	failed, first := add.Failed()
	if first != nil {
		return fmt.Errorf("%d serial ADDs failed; first: %w", failed, first)
	}
	r.duplicates += add.Duplicates()
	var err error
	if r.serialDaemonP50, r.serialOverheadP50, r.serialOverheadP99, err = forwardingCost(&s, add, logDir); err != nil {
		return err
	}
	if failed, first := s.Do(ctx, "DEL", n, 1).Failed(); first != nil {
		return fmt.Errorf("%d serial DELs failed; first: %w", failed, first)
	}
	return nil
}

// leftovers counts the allocations the plugin's store still holds.
func leftovers(ctx context.Context, srv *apiserver.Server, name, network, cidr string) (int, error) {
	if name == "whereabouts" {
		dc, err := dynamic.NewForConfig(srv.Config())
		if err != nil {
			return 0, err
		}
		n := 0
		for _, res := range []string{"ippools", "overlappingrangeipreservations"} {
			l, err := dc.Resource(schema.GroupVersionResource{Group: "whereabouts.cni.cncf.io", Version: "v1alpha1", Resource: res}).
				Namespace(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
			if err != nil {
				return 0, fmt.Errorf("list whereabouts %s: %w", res, err)
			}
			for _, it := range l.Items {
				if res == "ippools" {
					a, _ := unstructuredMap(it.Object, "spec", "allocations")
					n += len(a)
				} else {
					n++ // a reservation left behind
				}
			}
		}
		return n, nil
	}
	store, err := ipam.NewKubeStore(srv.Config())
	if err != nil {
		return 0, err
	}
	cfg, err := ipam.Parse([]byte(fmt.Sprintf(`{"cniVersion":"1.0.0","name":"x","ipam":{"range":%q,"network_name":%q}}`, cidr, network)), ipam.Env{})
	if err != nil {
		return 0, err
	}
	blocks, err := store.List(ctx, cfg.Pool(cfg.Ranges[0]), "")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, b := range blocks {
		for _, a := range b.Spec.Allocations {
			if a.Reserved == "" {
				n++
			}
		}
	}
	return n, nil
}

func unstructuredMap(obj map[string]any, path ...string) (map[string]any, bool) {
	cur := obj
	for _, p := range path {
		next, ok := cur[p].(map[string]any)
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func progress(s string) {
	fmt.Fprintf(os.Stderr, "ipam-compare: %s %s\n", time.Now().Format("15:04:05"), s)
}

// servedADDs maps each container whose ADD the daemon's log says it ran to
// the daemon's own time for it.
func servedADDs(log string) map[string]time.Duration {
	took := map[string]time.Duration{}
	for _, c := range plugindaemon.Served(log) {
		if c.Command == "ADD" && c.Took > 0 {
			took[c.Container] = c.Took
		}
	}
	return took
}

// forwardingCost matches each ADD with the daemon's log line for it: the
// daemon's own time, and the call's latency less it.
func forwardingCost(l *ipamload.Load, add ipamload.Run, logDir string) (daemon, p50, p99 time.Duration, err error) {
	logs, err := filepath.Glob(filepath.Join(logDir, "*.log"))
	if err != nil {
		return 0, 0, 0, err
	}
	took := map[string]time.Duration{}
	for _, f := range logs {
		b, err := os.ReadFile(f)
		if err != nil {
			return 0, 0, 0, err
		}
		maps.Copy(took, servedADDs(string(b)))
	}
	var own, rest []time.Duration
	for i, lat := range add.Lat {
		d, ok := took[l.ContainerID(i)]
		if !ok {
			return 0, 0, 0, fmt.Errorf("no daemon served ADD %s (not forwarded?)", l.ContainerID(i))
		}
		own = append(own, d)
		rest = append(rest, lat-d)
	}
	pct := func(s []time.Duration, p float64) time.Duration {
		slices.Sort(s)
		return s[min(len(s)-1, int(p/100*float64(len(s))))]
	}
	return pct(own, 50), pct(rest, 50), pct(rest, 99), nil
}

// procCPU sums user+system CPU time of the server processes by name
// (kube-apiserver, etcd, rdmanet-daemon), from /proc.
func procCPU() map[string]time.Duration {
	out := map[string]time.Duration{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		st := string(b)
		open, closing := strings.IndexByte(st, '('), strings.LastIndexByte(st, ')')
		if open < 0 || closing < open {
			continue
		}
		comm := st[open+1 : closing]
		if comm != "kube-apiserver" && comm != "etcd" && comm != "rdmanet-daemon" {
			continue
		}
		f := strings.Fields(st[closing+2:])
		if len(f) < 13 {
			continue
		}
		var ut, stt int64
		fmt.Sscan(f[11], &ut)
		fmt.Sscan(f[12], &stt)
		out[comm] += time.Duration(ut+stt) * 10 * time.Millisecond // USER_HZ = 100
	}
	return out
}
