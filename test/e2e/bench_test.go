package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ns"
	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/rdmanet/rdmanet/test/apiserver"
	"github.com/rdmanet/rdmanet/test/netnsutil"
)

// BenchmarkMetaAdd measures full ADD latency of a meta plugin against the
// real API server on the simulated node — default network (bridge with
// host-local) plus one attachment — for the real Multus thin plugin (v4.2.3,
// built by hack/build-multus.sh) and for rdmanet per call (rdmanet-direct),
// through the warm daemon, and through the daemon with concurrentNetworks.
// Every mode is exec'd through libcni as a runtime does, with the same
// default network conflist, the same NAD and the same plugin binaries.
//
// Chains (the NAD of the attachment):
//
//	sriov         the seed's SR-IOV chain (sriov → rdma → rdmanet-ipam); rdmanet only
//	macvlan       macvlan with host-local IPAM, the chain Multus was measured on
//	macvlan-ipam  macvlan with rdmanet-ipam (Whereabouts config); rdmanet only
//
// Each iteration is one ADD (timed) and, untimed: a check that the pod has
// eth0 and net1, a wait (on a watch, no extra requests) until the pod's
// network-status annotation is written for this ADD — so an asynchronous
// status write is counted and is never cancelled by the DEL — and one DEL.
// Metrics: p50/p99 ms of ADD, API requests per ADD (the server's
// apiserver_request_total from just before the ADD to the status write), and
// for rdmanet the split of the median ADD into delegate (netlink) time, API
// time and the rest (process start, client setup). After all sub-benchmarks
// one ratio line per chain compares each mode with the baseline (multus, or
// direct where Multus is not run).
//
//	make bench-meta
func BenchmarkMetaAdd(b *testing.B) {
	results := map[string]benchResult{}
	for _, mode := range benchModes {
		for _, chain := range benchChains {
			if (mode == "multus" && !multusChains[chain]) || (mode == "multus-daemon" && !multusDaemonChains[chain]) {
				continue
			}
			b.Run(mode+"/"+chain, func(b *testing.B) {
				e := benchSetup(b, chain, mode)
				var adds []time.Duration
				var addReqs, delReqs int64
				sw := e.watchStatus(b)
				b.ResetTimer()
				b.StopTimer()
				var lastAdd string // what the last ADD requested
				for i := 0; i < b.N; i++ {
					rt := e.rt(fmt.Sprintf("bench-%d", i), e.benchPod, "")
					k0 := e.apiRequestsByKind(b)
					b.StartTimer()
					start := time.Now()
					err := e.add(rt)
					d := time.Since(start)
					b.StopTimer()
					if err != nil {
						b.Fatal(err)
					}
					adds = append(adds, d)
					e.checkAdded(b, sw)
					// the server counts a request after answering it
					time.Sleep(10 * time.Millisecond)
					k1 := e.apiRequestsByKind(b)
					if err := e.del(rt); err != nil {
						b.Fatal(err)
					}
					c2 := e.apiRequests(b)
					c0, c1 := sumKinds(k0), sumKinds(k1)
					addReqs += c1 - c0
					delReqs += c2 - c1
					lastAdd = requestDiff(k0, k1)
				}
				perAdd := float64(addReqs) / float64(len(adds))
				b.ReportMetric(perAdd, "api_requests/add")
				b.ReportMetric(float64(delReqs)/float64(len(adds)), "api_requests/del")
				p50, p99 := pct(adds, 50), pct(adds, 99)
				b.ReportMetric(ms(p50), "p50_ms")
				b.ReportMetric(ms(p99), "p99_ms")
				results[mode+"/"+chain] = benchResult{p50: ms(p50), p99: ms(p99), perAdd: perAdd}
				if !finalRun(b) {
					return
				}
				fmt.Printf("meta-bench: mode=%s chain=default+%s last_add_requests=%q\n", mode, chain, lastAdd)
				if strings.HasPrefix(mode, "multus") {
					// Multus' debug log has no per-delegate timing we parse:
					// latency and API requests only.
					fmt.Printf("meta-bench: mode=%s chain=default+%s adds=%d p50_ms=%.1f p99_ms=%.1f api_requests_per_add=%.2f\n",
						mode, chain, len(adds), ms(p50), ms(p99), perAdd)
					return
				}
				split := e.split(mode)
				for k, v := range split {
					b.ReportMetric(v, k)
				}
				fmt.Printf("meta-bench: mode=%s chain=default+%s adds=%d p50_ms=%.1f p99_ms=%.1f delegates_ms=%.1f api_ms=%.1f start_and_setup_ms=%.1f api_requests_per_add=%.2f\n",
					mode, chain, len(adds), ms(p50), ms(p99), split["delegates_ms"], split["api_ms"], ms(p50)-split["delegates_ms"]-split["api_ms"], perAdd)
			})
		}
	}
	printRatios(results)
}

// Modes and chains of the meta benchmarks. multus runs only on the chains in
// multusChains (the others need rdmanet's own plugins or PodResources).
var (
	benchModes   = []string{"multus", "multus-daemon", "direct", "daemon", "daemon-concurrent"}
	benchChains  = []string{"sriov", "macvlan", "macvlan-ipam"}
	multusChains = map[string]bool{"macvlan": true, "sriov": true}
	// multus-daemon is Multus with rdmanet's plugins as thin clients of a
	// plugin daemon: only chains of rdmanet plugins
	multusDaemonChains = map[string]bool{"sriov": true}
)

type benchResult struct{ p50, p99, perAdd float64 }

// printRatios prints, per chain, how much faster each mode's ADD is than the
// baseline: Multus where it ran on the chain, else rdmanet per call.
func printRatios(results map[string]benchResult) {
	// the exec'd seed chain under Multus, thin clients of the plugin daemon,
	// against rdmanet's own daemon path (goal: p50 within 20 ms)
	if fwd, ok := results["multus-daemon/sriov"]; ok {
		if d, ok := results["daemon/sriov"]; ok {
			fmt.Printf("meta-bench: chain=default+sriov multus_daemon_p50_ms=%.1f daemon_p50_ms=%.1f p50_diff_ms=%.1f multus_daemon_p99_ms=%.1f daemon_p99_ms=%.1f\n",
				fwd.p50, d.p50, fwd.p50-d.p50, fwd.p99, d.p99)
		}
	}
	for _, chain := range benchChains {
		base := "multus"
		if _, ok := results[base+"/"+chain]; !ok {
			base = "direct"
		}
		br, ok := results[base+"/"+chain]
		if !ok {
			continue
		}
		for _, mode := range benchModes {
			r, ok := results[mode+"/"+chain]
			if !ok || mode == base {
				continue
			}
			fmt.Printf("meta-bench: chain=default+%s %s_p50_ms=%.1f %s_p50_ms=%.1f speedup_p50=%.2fx %s_p99_ms=%.1f %s_p99_ms=%.1f speedup_p99=%.2fx %s_api_requests_per_add=%.2f %s_api_requests_per_add=%.2f\n",
				chain, base, br.p50, mode, r.p50, br.p50/r.p50, base, br.p99, mode, r.p99, br.p99/r.p99, base, br.perAdd, mode, r.perAdd)
		}
	}
}

// finalRun: false for the one-iteration probe run the testing package makes
// before the -benchtime Nx run (its figures would be printed twice).
func finalRun(b *testing.B) bool {
	f := flag.Lookup("test.benchtime")
	if f == nil || !strings.HasSuffix(f.Value.String(), "x") {
		return true
	}
	n, err := strconv.Atoi(strings.TrimSuffix(f.Value.String(), "x"))
	return err != nil || b.N >= n
}

// BenchmarkMetaParallel64 attaches 64 pods at once (Multus, rdmanet per call,
// through the daemon, and through the daemon with concurrentNetworks) on the
// macvlan chain and reports the wall time until all 64 are attached and how
// many ADDs failed on the way: a failed ADD is torn down and retried as a new
// sandbox after a pause (see retryPause), at most parallelAttempts times.
// Multus gives up on a pod GET that takes longer than 250 ms (twice), which
// 64 processes at once on a small node can cause; its pods that never attach
// are reported (attached=N/64), an rdmanet pod that never attaches fails.
func BenchmarkMetaParallel64(b *testing.B) {
	const chain = "macvlan"
	for _, mode := range benchModes {
		if mode == "multus-daemon" && !multusDaemonChains[chain] {
			continue // no rdmanet plugin in the chain: the same as "multus"
		}
		b.Run(mode, func(b *testing.B) {
			e := benchSetup(b, chain, mode)
			pods := make([]ns.NetNS, 64)
			podObjs := make([]*corev1.Pod, 64)
			for i := range pods {
				pods[i] = netnsutil.NewNS(b)
				p := e.benchPod.DeepCopy()
				p.ObjectMeta = metav1.ObjectMeta{Name: fmt.Sprintf("trainer-%d", i), Namespace: p.Namespace, Annotations: p.Annotations}
				_ = e.core.CoreV1().Pods(p.Namespace).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
				created, err := e.core.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{})
				if err != nil {
					b.Fatal(err)
				}
				podObjs[i] = created
			}
			b.ResetTimer()
			for it := 0; it < b.N; it++ {
				var wg sync.WaitGroup
				var failed atomic.Int64
				var firstErr sync.Once
				errs := make([]error, len(pods))
				rts := make([]*libcni.RuntimeConf, len(pods))
				start := time.Now()
				for i := range pods {
					wg.Add(1)
					go func(i int) {
						defer wg.Done()
						for attempt := 0; attempt < parallelAttempts; attempt++ {
							if attempt > 0 {
								time.Sleep(retryPause(attempt))
							}
							rt := e.rt(fmt.Sprintf("par-%d-%d-%d", it, i, attempt), podObjs[i], "")
							rt.NetNS = pods[i].Path()
							err := e.add(rt)
							if err == nil {
								rts[i], errs[i] = rt, nil
								return
							}
							errs[i] = err
							failed.Add(1)
							firstErr.Do(func() { b.Logf("mode %s: first failed ADD: %v", mode, err) })
							_ = e.del(rt) // the runtime tears the failed sandbox down
						}
					}(i)
				}
				wg.Wait()
				wall := time.Since(start)
				b.StopTimer()
				attached := 0
				for i := range pods {
					if errs[i] != nil {
						if mode != "multus" {
							b.Fatalf("pod %d: %d ADDs failed, last: %v", i, parallelAttempts, errs[i])
						}
						b.Logf("pod %d: Multus failed %d ADDs, last: %v", i, parallelAttempts, errs[i])
						continue
					}
					attached++
					if links := netnsutil.Links(b, pods[i]); !contains(links, "eth0") || !contains(links, "net1") {
						b.Fatalf("pod %d has %v after ADD, want eth0 and net1", i, links)
					}
				}
				b.ReportMetric(wall.Seconds(), "wall_s")
				b.ReportMetric(float64(failed.Load()), "failed_adds")
				if finalRun(b) {
					fmt.Printf("meta-bench: mode=%s parallel=64 chain=default+macvlan wall_s=%.2f attached=%d/%d failed_adds=%d\n",
						mode, wall.Seconds(), attached, len(pods), failed.Load())
				}
				for i := range pods {
					if rts[i] == nil {
						continue
					}
					if err := e.del(rts[i]); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
			}
		})
	}
}

// parallelAttempts bounds the ADDs of one pod in BenchmarkMetaParallel64.
const parallelAttempts = 8

// retryPause is the pause before the attempt'th ADD of a pod whose ADD
// failed: 0.5 s doubling up to 8 s, ±50% jitter (kubelet retries a pod
// whose sandbox failed after ~10 s).
func retryPause(attempt int) time.Duration {
	d := 500 * time.Millisecond << min(attempt-1, 4)
	return d/2 + time.Duration(rand.Int64N(int64(d)))
}

type benchEnv struct {
	*env
	mode     string
	chain    string
	benchPod *corev1.Pod
	daemon   *exec.Cmd
	logPath  string
	multus   map[string]any // the Multus thin plugin's config (mode multus)
}

// The attachment's NAD config per chain (the sriov chain is the seed NAD).
// %s is the host-local data dir.
const (
	macvlanNAD     = `{"cniVersion":"0.3.1","name":"rdmashared-net","type":"macvlan","master":"roce0","mode":"bridge","ipam":{"type":"host-local","ranges":[[{"subnet":"192.168.2.0/24","gateway":"192.168.2.1"}]],"dataDir":%q}}`
	macvlanIPAMNAD = `{"cniVersion":"0.3.1","name":"rdmashared-net","type":"macvlan","master":"roce0","mode":"bridge","ipam":{"type":"whereabouts","range":"192.168.2.0/24","gateway":"192.168.2.1"}}`
)

// benchSetup builds the harness for one chain and mode: the NAD, the pod,
// and for the daemon modes the running daemon, for multus the Multus config.
func benchSetup(b *testing.B, chain, mode string) *benchEnv {
	e := setupTB(b)
	be := &benchEnv{env: e, mode: mode, chain: chain}
	ctx := context.Background()
	nsName := "bench-" + chain
	if _, err := e.core.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName}}, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		b.Fatal(err)
	}
	nc, err := nadclient.NewForConfig(e.api.Config())
	if err != nil {
		b.Fatal(err)
	}
	cfg := seedNAD
	ann := map[string]string{"k8s.v1.cni.cncf.io/resourceName": resourceName}
	switch chain {
	case "sriov":
	case "macvlan", "macvlan-ipam":
		netnsutil.AddVeth(b, e.host, "roce0", nil, "roce0peer", nil)
		netnsutil.SetUp(b, e.host, "roce0")
		cfg, ann = macvlanIPAMNAD, nil
		if chain == "macvlan" {
			cfg = fmt.Sprintf(macvlanNAD, filepath.Join(e.dir, "hostlocal"))
		}
	default:
		b.Fatalf("unknown chain %q", chain)
	}
	// The NAD is rewritten for every sub-benchmark: its config names this
	// sub-benchmark's temp dir.
	nads := nc.K8sCniCncfIoV1().NetworkAttachmentDefinitions(nsName)
	_ = nads.Delete(ctx, "train-net", metav1.DeleteOptions{})
	nad := &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Name: "train-net", Namespace: nsName, Annotations: ann}, Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: cfg}}
	for i := 0; i < 50; i++ {
		if _, err = nads.Create(ctx, nad, metav1.CreateOptions{}); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		b.Fatal(err)
	}
	_ = e.core.CoreV1().Pods(nsName).Delete(ctx, "trainer", metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "trainer", Namespace: nsName,
		Annotations: map[string]string{"k8s.v1.cni.cncf.io/networks": "train-net@net1"}},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "trainer", Image: "trainer:1"}}}}
	for i := 0; i < 50; i++ {
		if be.benchPod, err = e.core.CoreV1().Pods(nsName).Create(ctx, p, metav1.CreateOptions{}); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		b.Fatal(err)
	}
	e.allocateVF(nsName+"/trainer", 0)
	e.conf["logLevel"] = "debug"
	be.logPath = filepath.Join(e.dir, "rdmanet.log")
	// Plugins' stderr (Multus logs its Kubernetes events there through klog)
	// goes to a file instead of the benchmark output, for every mode alike.
	stderrPath := filepath.Join(e.dir, "plugins.stderr")
	stderr, err := os.Create(stderrPath)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stderr.Close()
		if b.Failed() {
			out, _ := os.ReadFile(stderrPath)
			if len(out) > 3000 {
				out = out[len(out)-3000:]
			}
			b.Logf("plugins' stderr (tail):\n%s", out)
		}
	})
	e.cni = libcni.NewCNIConfigWithCacheDir([]string{binDir}, filepath.Join(e.dir, "runtime-cache"),
		&invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: stderr}, PluginDecoder: version.PluginDecoder{}})
	switch mode {
	case "direct":
	case "daemon":
		be.startDaemon(b)
	case "daemon-concurrent":
		// default network and attachments at once (ignored by a daemon
		// that does not know the field yet)
		e.conf["concurrentNetworks"] = true
		be.startDaemon(b)
	case "multus":
		// rdmanet's sriov, rdma and rdmanet-ipam exec'd by Multus, each
		// doing the whole call itself
		b.Setenv("RDMANET_PLUGIN_SOCKET", "off")
		be.setupMultus(b)
	case "multus-daemon":
		// the same binaries as thin clients of rdmanet-daemon's plugin socket
		b.Setenv("RDMANET_PLUGIN_SOCKET", be.startPluginDaemon(b))
		be.setupMultus(b)
	default:
		b.Fatalf("unknown mode %q", mode)
	}
	return be
}

// setupMultus installs the Multus thin plugin into the harness's plugin
// directory and writes its config: what Multus' own thin entrypoint generates
// (the default network's conflist inline as the one delegate, kubeconfig) plus
// the harness's directories — binDir holds the same bridge, host-local and
// macvlan binaries every mode runs. No readinessindicatorfile, no log file
// (Multus' default level logs nothing on success).
func (e *benchEnv) setupMultus(b *testing.B) {
	bin := findMultus(b)
	if e.chain == "sriov" {
		// Multus finds the VF kubelet allocated through PodResources at
		// kubelet's fixed path
		e.servePodResourcesAtKubeletPath(b)
	}
	if err := os.Symlink(bin, filepath.Join(binDir, "multus")); err != nil && !os.IsExist(err) {
		b.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(e.dir, "conf", "00-cluster.conflist"))
	if err != nil {
		b.Fatal(err)
	}
	var def map[string]any
	if err := json.Unmarshal(raw, &def); err != nil {
		b.Fatal(err)
	}
	e.multus = map[string]any{
		"cniVersion": "1.0.0", "name": "multus-cni-network", "type": "multus",
		"kubeconfig": e.conf["kubeconfig"], "delegates": []any{def},
		"confDir": e.conf["confDir"], "cniDir": filepath.Join(e.dir, "multus"), "binDir": binDir,
	}
}

// findMultus: $MULTUS_BIN, else multus in $RDMANET_TOOLS_BIN, $TOOLS_BIN or
// <repo>/.tools/bin (hack/build-multus.sh); skips when it is not built.
func findMultus(b *testing.B) string {
	if v := os.Getenv("MULTUS_BIN"); v != "" {
		return v
	}
	var dirs []string
	for _, env := range []string{apiserver.EnvToolsBin, "TOOLS_BIN"} {
		if v := os.Getenv(env); v != "" {
			dirs = append(dirs, v)
		}
	}
	if root, err := apiserver.RepoRoot(); err == nil {
		dirs = append(dirs, filepath.Join(root, ".tools", "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "multus")
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			return p
		}
	}
	b.Skipf("multus not found in %s: build it with hack/build-multus.sh (make multus-tool)", strings.Join(dirs, ", "))
	return ""
}

// list is the runtime's network config list: the Multus thin plugin in mode
// multus, rdmanet otherwise.
func (e *benchEnv) list() *libcni.NetworkConfigList {
	if e.multus == nil {
		return e.env.list()
	}
	raw, err := json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": "multus-cni-network", "plugins": []any{e.multus}})
	if err != nil {
		e.t.Fatal(err)
	}
	l, err := libcni.ConfListFromBytes(raw)
	if err != nil {
		e.t.Fatal(err)
	}
	return l
}

func (e *benchEnv) add(rt *libcni.RuntimeConf) error {
	l := e.list()
	return e.host.Do(func(ns.NetNS) error {
		_, err := e.cni.AddNetworkList(context.Background(), l, rt)
		return err
	})
}

func (e *benchEnv) del(rt *libcni.RuntimeConf) error {
	l := e.list()
	return e.host.Do(func(ns.NetNS) error { return e.cni.DelNetworkList(context.Background(), l, rt) })
}

// statusWatch follows the bench pod with a watch (one long-running request,
// not counted per ADD) to see each ADD's network-status write.
type statusWatch struct {
	e    *benchEnv
	w    watch.Interface
	rv   string
	last string
}

func (e *benchEnv) watchStatus(b *testing.B) *statusWatch {
	s := &statusWatch{e: e, rv: e.benchPod.ResourceVersion}
	s.start(b)
	b.Cleanup(func() { s.w.Stop() })
	return s
}

func (s *statusWatch) start(b *testing.B) {
	w, err := s.e.core.CoreV1().Pods(s.e.benchPod.Namespace).Watch(context.Background(), metav1.ListOptions{
		FieldSelector: "metadata.name=" + s.e.benchPod.Name, ResourceVersion: s.rv})
	if err != nil {
		b.Fatalf("watch pod: %v", err)
	}
	s.w = w
}

// next waits for the pod's network-status annotation to change and returns it.
func (s *statusWatch) next(b *testing.B) string {
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-s.w.ResultChan():
			if !ok {
				s.start(b)
				continue
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod {
				b.Fatalf("pod watch: %v", ev.Object)
			}
			s.rv = p.ResourceVersion
			if st := p.Annotations[nadv1.NetworkStatusAnnot]; st != "" && st != s.last {
				s.last = st
				return st
			}
		case <-timeout:
			b.Fatalf("no new network-status on %s/%s within 30s of ADD", s.e.benchPod.Namespace, s.e.benchPod.Name)
		}
	}
}

// checkAdded: the pod has eth0 and net1, and its network-status (written for
// this ADD) names both — a meta plugin that skipped the attachment, or
// Multus answering an empty result for a pod it could not find, fails here.
func (e *benchEnv) checkAdded(b *testing.B, sw *statusWatch) {
	if links := netnsutil.Links(b, e.pod); !contains(links, "eth0") || !contains(links, "net1") {
		b.Fatalf("pod has %v after ADD, want eth0 and net1", links)
	}
	raw := sw.next(b)
	var st []nadv1.NetworkStatus
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		b.Fatalf("network-status %q: %v", raw, err)
	}
	if len(st) != 2 || st[0].Interface != "eth0" || !st[0].Default || st[1].Interface != "net1" ||
		st[1].Name != e.benchPod.Namespace+"/train-net" || len(st[1].IPs) != 1 {
		b.Fatalf("network-status = %s", raw)
	}
}

func (e *benchEnv) startDaemon(b *testing.B) {
	e.logPath = e.startMetaDaemon(b)
}

var (
	delegateRe  = regexp.MustCompile(`msg="delegate added".* ms=(\d+)`)
	delegatesRe = regexp.MustCompile(`msg="delegates added".* ms=(\d+)`)
	addDoneRe   = regexp.MustCompile(`msg="ADD done".* ms=(\d+)`)
)

// split reads the plugin's debug log: median time in delegates (the
// plugins doing netlink and IPAM; the wall time of all of them where the log
// has it, which counts concurrent delegates once, else the sum of each
// delegate's time) and median total inside the plugin; the API share is the
// plugin-internal time not spent in delegates.
func (e *benchEnv) split(mode string) map[string]float64 {
	f, err := os.Open(e.logPath)
	if err != nil {
		return map[string]float64{}
	}
	defer f.Close()
	var dels, totals []time.Duration
	var sum, wall time.Duration
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if m := delegateRe.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			sum += time.Duration(n) * time.Millisecond
		}
		if m := delegatesRe.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			wall = time.Duration(n) * time.Millisecond
		}
		if m := addDoneRe.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			totals = append(totals, time.Duration(n)*time.Millisecond)
			if wall > 0 {
				sum = wall
			}
			dels = append(dels, sum)
			sum, wall = 0, 0
		}
	}
	if len(totals) == 0 {
		return map[string]float64{}
	}
	d, tot := pct(dels, 50), pct(totals, 50)
	return map[string]float64{"delegates_ms": ms(d), "api_ms": ms(tot - d)}
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	if i < 1 {
		i = 1
	}
	return s[i-1]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// apiRequests sums the API server's apiserver_request_total counter, less
// the benchmark's own reads of /metrics.
func (e *benchEnv) apiRequests(b *testing.B) int64 {
	return sumKinds(e.apiRequestsByKind(b))
}

func sumKinds(k map[string]float64) int64 { return apiserver.Total(k) }

// apiRequestsByKind is apiserver_request_total by "VERB resource[/subresource] code".
func (e *benchEnv) apiRequestsByKind(b *testing.B) map[string]float64 {
	raw, err := e.core.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatalf("read API server metrics: %v", err)
	}
	return apiserver.ParseRequests(raw)
}

// requestDiff names what was requested between two apiRequestsByKind reads:
// "GET pods 200 x2, PUT pods/status 200".
func requestDiff(before, after map[string]float64) string {
	var out []string
	for k, v := range after {
		if n := int(v - before[k]); n == 1 {
			out = append(out, k)
		} else if n > 1 {
			out = append(out, fmt.Sprintf("%s x%d", k, n))
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// kubeletPodResources is where Multus v4 dials kubelet's PodResources API
// (not configurable in Multus).
const kubeletPodResources = "/var/lib/kubelet/pod-resources/kubelet.sock"

// servePodResourcesAtKubeletPath serves the harness's PodResources fake at
// kubelet's own path for Multus, and removes it (and the directories it
// made) afterwards. A socket already there is a kubelet's: the benchmark
// fails rather than shadow it.
func (e *benchEnv) servePodResourcesAtKubeletPath(b *testing.B) {
	if _, err := os.Lstat(kubeletPodResources); err == nil {
		b.Fatalf("%s exists (a kubelet on this machine?): Multus' sriov rows need that path for the benchmark's PodResources fake; run bench-meta on a machine without kubelet", kubeletPodResources)
	}
	var made []string
	for d := filepath.Dir(kubeletPodResources); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		made = append(made, d)
	}
	if err := os.MkdirAll(filepath.Dir(kubeletPodResources), 0o750); err != nil {
		b.Fatal(err)
	}
	lis, err := net.Listen("unix", kubeletPodResources)
	if err != nil {
		b.Fatal(err)
	}
	g := grpc.NewServer()
	podresourcesapi.RegisterPodResourcesListerServer(g, e.pr)
	go func() { _ = g.Serve(lis) }()
	b.Cleanup(func() {
		g.Stop()
		_ = os.Remove(kubeletPodResources)
		for _, d := range made { // innermost first
			_ = os.Remove(d)
		}
	})
}

// startPluginDaemon runs rdmanet-daemon with only its plugin socket in the
// host namespace and returns the socket; at the end it checks the daemon
// served calls (the plugins did not do the work themselves).
func (e *benchEnv) startPluginDaemon(b *testing.B) string {
	sock := filepath.Join(e.dir, "plugins.sock")
	logPath := filepath.Join(e.dir, "plugin-daemon.log")
	b.Cleanup(func() { // runs after the daemon's own cleanup stopped it
		out, _ := os.ReadFile(logPath)
		if !strings.Contains(string(out), "plugin call served by the daemon") {
			b.Errorf("the plugin daemon served no call (the plugins did the work themselves); log:\n%s", out)
		}
	})
	startPluginDaemon(b, sock, logPath, e.host)
	return sock
}
