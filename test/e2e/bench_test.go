package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rdmanet/rdmanet/internal/devinfo"
	"github.com/rdmanet/rdmanet/test/netnsutil"
	"github.com/rdmanet/rdmanet/test/sysfsfixture"
)

// BenchmarkMetaAdd measures full ADD latency of the meta plugin against the
// real API server on the simulated node — default network (bridge) plus one
// attachment — per call (rdmanet-direct) and through the warm daemon, for
// the seed's SR-IOV chain and for a macvlan attachment (the chain Multus was
// measured on). Each iteration is one ADD (timed) and one DEL (not timed).
// Metrics: p50/p99 ms of ADD, and the split of the median ADD into delegate
// (netlink) time, API time and the rest (process start, client setup).
//
//	make bench-meta
func BenchmarkMetaAdd(b *testing.B) {
	for _, mode := range []string{"direct", "daemon"} {
		for _, chain := range []string{"sriov", "macvlan"} {
			b.Run(mode+"/"+chain, func(b *testing.B) {
				e := benchSetup(b, chain)
				if mode == "daemon" {
					e.startDaemon(b)
				}
				var adds []time.Duration
				reqBefore := e.apiRequests(b)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					rt := e.rt(fmt.Sprintf("bench-%d", i), e.benchPod, "")
					start := time.Now()
					if err := e.add(rt); err != nil {
						b.Fatal(err)
					}
					adds = append(adds, time.Since(start))
					b.StopTimer()
					if err := e.del(rt); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				b.StopTimer()
				// DEL makes no API request, so the server's request counter
				// grows only by what the ADDs sent.
				perAdd := float64(e.apiRequests(b)-reqBefore) / float64(len(adds))
				b.ReportMetric(perAdd, "api_requests/add")
				p50, p99 := pct(adds, 50), pct(adds, 99)
				b.ReportMetric(ms(p50), "p50_ms")
				b.ReportMetric(ms(p99), "p99_ms")
				split := e.split(mode)
				for k, v := range split {
					b.ReportMetric(v, k)
				}
				fmt.Printf("meta-bench: mode=%s chain=default+%s adds=%d p50_ms=%.1f p99_ms=%.1f delegates_ms=%.1f api_ms=%.1f start_and_setup_ms=%.1f api_requests_per_add=%.2f\n",
					mode, chain, len(adds), ms(p50), ms(p99), split["delegates_ms"], split["api_ms"], ms(p50)-split["delegates_ms"]-split["api_ms"], perAdd)
			})
		}
	}
}

// BenchmarkMetaParallel64 attaches 64 pods at once (per call and through the
// daemon) and reports the wall time.
func BenchmarkMetaParallel64(b *testing.B) {
	for _, mode := range []string{"direct", "daemon"} {
		b.Run(mode, func(b *testing.B) {
			e := benchSetup(b, "macvlan")
			if mode == "daemon" {
				e.startDaemon(b)
			}
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
				errs := make(chan error, len(pods))
				start := time.Now()
				for i := range pods {
					wg.Add(1)
					go func(i int) {
						defer wg.Done()
						rt := e.rt(fmt.Sprintf("par-%d-%d", it, i), podObjs[i], "")
						rt.NetNS = pods[i].Path()
						errs <- e.host.Do(func(ns.NetNS) error {
							_, err := e.cni.AddNetworkList(context.Background(), e.list(), rt)
							return err
						})
					}(i)
				}
				wg.Wait()
				wall := time.Since(start)
				close(errs)
				for err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(wall.Seconds(), "wall_s")
				fmt.Printf("meta-bench: mode=%s parallel=64 chain=default+macvlan wall_s=%.2f\n", mode, wall.Seconds())
				b.StopTimer()
				for i := range pods {
					rt := e.rt(fmt.Sprintf("par-%d-%d", it, i), podObjs[i], "")
					rt.NetNS = pods[i].Path()
					if err := e.del(rt); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
			}
		})
	}
}

type benchEnv struct {
	*env
	benchPod *corev1.Pod
	daemon   *exec.Cmd
	logPath  string
}

func benchSetup(b *testing.B, chain string) *benchEnv {
	e := setupTB(b)
	be := &benchEnv{env: e}
	ctx := context.Background()
	if _, err := e.core.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench-" + chain}}, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		b.Fatal(err)
	}
	nc, err := nadclient.NewForConfig(e.api.Config())
	if err != nil {
		b.Fatal(err)
	}
	cfg := seedNAD
	ann := map[string]string{"k8s.v1.cni.cncf.io/resourceName": resourceName}
	if chain == "macvlan" {
		netnsutil.AddVeth(b, e.host, "roce0", nil, "roce0peer", nil)
		netnsutil.SetUp(b, e.host, "roce0")
		cfg = `{"cniVersion":"0.3.1","name":"rdmashared-net","type":"macvlan","master":"roce0","mode":"bridge","ipam":{"type":"whereabouts","range":"192.168.2.0/24","gateway":"192.168.2.1"}}`
		ann = nil
	}
	nad := &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Name: "train-net", Namespace: "bench-" + chain, Annotations: ann}, Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: cfg}}
	if _, err := nc.K8sCniCncfIoV1().NetworkAttachmentDefinitions("bench-"+chain).Create(ctx, nad, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		b.Fatal(err)
	}
	_ = e.core.CoreV1().Pods("bench-"+chain).Delete(ctx, "trainer", metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "trainer", Namespace: "bench-" + chain,
		Annotations: map[string]string{"k8s.v1.cni.cncf.io/networks": "train-net@net1"}},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "trainer", Image: "trainer:1"}}}}
	for i := 0; i < 50; i++ {
		if be.benchPod, err = e.core.CoreV1().Pods("bench-"+chain).Create(ctx, p, metav1.CreateOptions{}); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		b.Fatal(err)
	}
	vf := sysfsfixture.VFBDF(pfBDF, 0)
	e.pr.devices["bench-"+chain+"/trainer"] = []string{vf}
	if err := devinfo.Write(filepath.Join(e.dir, "devinfo"), resourceName, vf, devinfo.PCI(vf, pfBDF, e.fix.RDMAByBD[vf])); err != nil {
		b.Fatal(err)
	}
	e.conf["logLevel"] = "debug"
	be.logPath = filepath.Join(e.dir, "rdmanet.log")
	return be
}

func (e *benchEnv) startDaemon(b *testing.B) {
	sock := filepath.Join(e.dir, "daemon.sock")
	e.conf["daemonSocket"] = sock
	confFile := filepath.Join(e.dir, "rdmanet.conf")
	raw, err := json.Marshal(e.conf)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(confFile, raw, 0o644); err != nil {
		b.Fatal(err)
	}
	e.logPath = filepath.Join(e.dir, "daemon.log")
	logf, err := os.Create(e.logPath)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binDir, "rdmanet-daemon"), "--config", confFile, "--node-name", nodeName, "--log-level", "debug")
	cmd.Stdout, cmd.Stderr = logf, logf
	netnsutil.Do(b, e.host, cmd.Start)
	b.Cleanup(func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait(); logf.Close() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			return
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(e.logPath)
			b.Fatalf("daemon did not start:\n%s", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var (
	delegateRe = regexp.MustCompile(`msg="delegate added".* ms=(\d+)`)
	addDoneRe  = regexp.MustCompile(`msg="ADD done".* ms=(\d+)`)
)

// split reads the plugin's debug log: median time in delegates (the
// plugins doing netlink and IPAM) and median total inside the plugin; the
// API share is the plugin-internal time not spent in delegates.
func (e *benchEnv) split(mode string) map[string]float64 {
	f, err := os.Open(e.logPath)
	if err != nil {
		return map[string]float64{}
	}
	defer f.Close()
	var dels, totals []time.Duration
	var cur time.Duration
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if m := delegateRe.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			cur += time.Duration(n) * time.Millisecond
		}
		if m := addDoneRe.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			totals = append(totals, time.Duration(n)*time.Millisecond)
			dels = append(dels, cur)
			cur = 0
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

// apiRequests sums the API server's apiserver_request_total counter.
func (e *benchEnv) apiRequests(b *testing.B) int64 {
	raw, err := e.core.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatalf("read API server metrics: %v", err)
	}
	var total float64
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		if i := strings.LastIndex(line, " "); i > 0 {
			v, err := strconv.ParseFloat(line[i+1:], 64)
			if err == nil {
				total += v
			}
		}
	}
	return int64(total)
}
