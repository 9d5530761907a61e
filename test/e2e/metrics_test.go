package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"google.golang.org/grpc"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
	"github.com/rdmanet/rdmanet/test/netnsutil"
	"github.com/rdmanet/rdmanet/test/pluginbin"
)

// curl GETs url with the real curl (in netns when not nil) and returns the
// HTTP status and body.
func curl(t *testing.T, netns ns.NetNS, url string) (int, string) {
	t.Helper()
	var out []byte
	run := func() error {
		var err error
		out, err = exec.Command("curl", "-sS", "--max-time", "10", "-w", "\n%{http_code}", url).Output()
		return err
	}
	var err error
	if netns != nil {
		netnsutil.Do(t, netns, run) // curl inherits the namespace of the thread that starts it
	} else {
		err = run()
	}
	if err != nil {
		t.Fatalf("curl %s: %v\n%s", url, err, out)
	}
	s := string(out)
	i := strings.LastIndex(s, "\n")
	code, err := strconv.Atoi(s[i+1:])
	if err != nil {
		t.Fatalf("curl %s: no status in %q", url, s)
	}
	return code, strings.TrimSuffix(s[:i], "\n")
}

// metricValue is the value of the exposition line that starts with series
// ("name{labels}" with labels in Prometheus' sorted order), or -1.
func metricValue(page, series string) float64 {
	for _, l := range strings.Split(page, "\n") {
		if rest, ok := strings.CutPrefix(l, series+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

var servingRE = regexp.MustCompile(`"msg":"serving metrics and health","addr":"([^"]+)"|msg="serving metrics and health" addr=(\S+)`)

// endpointFromLog waits for the process's "serving metrics and health"
// record and returns its base URL.
func endpointFromLog(t *testing.T, logPath string) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(logPath)
		if m := servingRE.FindSubmatch(b); m != nil {
			return "http://" + string(m[1]) + string(m[2])
		}
		if time.Now().After(deadline) {
			t.Fatalf("no \"serving metrics and health\" record:\n%s", b)
		}
	}
}

// TestMetricsDaemon: the real rdmanet-daemon with --metrics-addr and JSON
// logs; curl reads /healthz, /readyz and /metrics in its namespace before
// and after the seed pod's ADD and DEL and a failing ADD, and the log
// records of the calls carry the pod and container as fields.
func TestMetricsDaemon(t *testing.T) {
	e := setup(t)
	netnsutil.SetUp(t, e.host, "lo")
	pod := e.seedObjects("ai-metrics", "face-trainer-0")
	e.allocateVF("ai-metrics/face-trainer-0", 1)
	logPath := e.startMetaDaemon(t, "--metrics-addr=127.0.0.1:0", "--log-format=json", "--ipam-state-dir="+filepath.Join(e.dir, "ipam"))
	base := endpointFromLog(t, logPath)

	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := curl(t, e.host, base+path); code != 200 || body != "ok" {
			t.Fatalf("GET %s = %d %q, want 200 ok", path, code, body)
		}
	}
	if code, body := curl(t, e.host, base+"/readyz?verbose"); code != 200 || !strings.Contains(body, "[+]source ok\n[+]meta-socket ok\n[+]plugin-socket ok") {
		t.Fatalf("GET /readyz?verbose = %d %q", code, body)
	}
	_, before := curl(t, e.host, base+"/metrics")
	for series, want := range map[string]float64{
		`rdmanet_daemon_ready`: 1,
		`rdmanet_meta_call_duration_seconds_count{command="ADD",result="ok"}`: -1,
	} {
		if got := metricValue(before, series); got != want {
			t.Fatalf("before ADD: %s = %v, want %v", series, got, want)
		}
	}

	rt := e.rt("c-metrics", pod, "")
	if err := e.add(rt); err != nil {
		t.Fatal(err)
	}
	e.eventualStatus(t, "ai-metrics", "face-trainer-0", 2, 10*time.Second)
	var page string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, page = curl(t, e.host, base+"/metrics")
		if metricValue(page, `rdmanet_meta_status_writes_total{result="written"}`) == 1 || time.Now().After(deadline) {
			break
		}
	}
	sum := func(page, prefix string) float64 { // every series of a name whose labels start so
		n := 0.0
		for _, l := range strings.Split(page, "\n") {
			if strings.HasPrefix(l, prefix) {
				if v, err := strconv.ParseFloat(l[strings.LastIndex(l, " ")+1:], 64); err == nil {
					n += v
				}
			}
		}
		return n
	}
	for series, want := range map[string]float64{
		`rdmanet_meta_call_duration_seconds_count{command="ADD",result="ok"}`:                                       1,
		`rdmanet_meta_add_step_duration_seconds_count{step="resolve"}`:                                              1,
		`rdmanet_meta_add_step_duration_seconds_count{step="delegates"}`:                                            1,
		`rdmanet_meta_delegate_duration_seconds_count{command="ADD",network="attachment",result="ok",type="sriov"}`: 1,
		`rdmanet_meta_delegate_duration_seconds_count{command="ADD",network="default",result="ok",type="bridge"}`:   1,
		`rdmanet_meta_status_writes_total{result="written"}`:                                                        1,
	} {
		if got := metricValue(page, series); got != want {
			t.Errorf("after ADD: %s = %v, want %v\n%s", series, got, want, grepMetrics(page))
		}
	}
	// each plugin of the chain ran once, in the daemon or exec'd
	for _, plugin := range []string{"sriov", "rdma", "bridge"} {
		if n := sum(page, `rdmanet_plugin_exec_duration_seconds_count{command="ADD",mode="in_process",plugin="`+plugin+`"`) +
			sum(page, `rdmanet_plugin_exec_duration_seconds_count{command="ADD",mode="process",plugin="`+plugin+`"`); n != 1 {
			t.Errorf("after ADD: %s ran %v times by rdmanet_plugin_exec_duration_seconds\n%s", plugin, n, grepMetrics(page))
		}
	}
	if n := sum(page, `rdmanet_ipam_allocated_addresses{`); n != 1 {
		t.Errorf("after ADD: rdmanet_ipam_allocated_addresses sums to %v, want 1\n%s", n, grepMetrics(page))
	}

	if err := e.del(rt); err != nil {
		t.Fatal(err)
	}
	// a pod naming a NAD that does not exist: ADD fails, reason "network"
	bad := e.podWithNetworks("ai-metrics", "no-nad", "ai-metrics/missing")
	if err := e.add(e.rt("c-bad", bad, "")); err == nil {
		t.Fatal("ADD of a pod naming a missing NAD succeeded")
	}
	_, page = curl(t, e.host, base+"/metrics")
	for series, want := range map[string]float64{
		`rdmanet_meta_call_duration_seconds_count{command="DEL",result="ok"}`:                                       1,
		`rdmanet_meta_delegate_duration_seconds_count{command="DEL",network="attachment",result="ok",type="sriov"}`: 1,
		`rdmanet_meta_call_errors_total{command="ADD",reason="network"}`:                                            1,
		`rdmanet_meta_call_duration_seconds_count{command="ADD",result="error"}`:                                    1,
	} {
		if got := metricValue(page, series); got != want {
			t.Errorf("after DEL and a failing ADD: %s = %v, want %v\n%s", series, got, want, grepMetrics(page))
		}
	}
	if n := sum(page, `rdmanet_ipam_allocated_addresses{`); n != 0 {
		t.Errorf("after DEL: rdmanet_ipam_allocated_addresses sums to %v, want 0", n)
	}

	// the CNI call's records: JSON, with the pod and the container as fields
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	found := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", sc.Text())
		}
		if rec["msg"] == "ADD done" {
			found = true
			if rec["container"] != "c-metrics" || rec["pod_namespace"] != "ai-metrics" || rec["pod_name"] != "face-trainer-0" {
				t.Errorf("ADD record %v lacks container, pod_namespace, pod_name", rec)
			}
			if n := strings.Count(sc.Text(), `"container":`); n != 1 {
				t.Errorf("ADD record names the container %d times: %s", n, sc.Text())
			}
		}
	}
	if !found {
		t.Error("no \"ADD done\" record in the daemon's JSON log")
	}
}

func grepMetrics(page string) string {
	var out []string
	for _, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(l, "rdmanet_") && !strings.Contains(l, "_bucket{") && !strings.Contains(l, "_sum{") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// fakeKubelet answers device plugin registrations and PodResources List.
type fakeKubelet struct {
	pluginapi.UnimplementedRegistrationServer
	podresourcesapi.UnimplementedPodResourcesListerServer
	mu    sync.Mutex
	regs  int
	alloc []string // device IDs of resourceName held by one pod
}

func (k *fakeKubelet) Register(context.Context, *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.regs++
	return &pluginapi.Empty{}, nil
}

func (k *fakeKubelet) List(context.Context, *podresourcesapi.ListPodResourcesRequest) (*podresourcesapi.ListPodResourcesResponse, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	pr := &podresourcesapi.PodResources{Namespace: "ai", Name: "trainer-0", Containers: []*podresourcesapi.ContainerResources{{Name: "trainer",
		Devices: []*podresourcesapi.ContainerDevices{{ResourceName: resourceName, DeviceIds: k.alloc}}}}}
	return &podresourcesapi.ListPodResourcesResponse{PodResources: []*podresourcesapi.PodResources{pr}}, nil
}

func serveGRPC(t *testing.T, sock string, register func(*grpc.Server)) *grpc.Server {
	t.Helper()
	_ = os.Remove(sock)
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	register(s)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return s
}

// TestMetricsAgent: the real rdmanet-agent with --metrics-addr on the
// simulated node; curl reads /readyz while kubelet is away (503, naming the
// pool and the socket), then after registration (200), and /metrics after
// registration, an allocation and a kubelet restart.
func TestMetricsAgent(t *testing.T) {
	dir := t.TempDir()
	if err := pluginbin.Build(dir, "github.com/rdmanet/rdmanet/cmd/rdmanet-agent"); err != nil {
		t.Fatal(err)
	}
	fix, err := sysfsfixture.NewStandard(filepath.Join(dir, "sys"), sysfsfixture.StandardOptions{RoCEVFs: 4})
	if err != nil {
		t.Fatal(err)
	}
	dp := filepath.Join(dir, "device-plugins")
	if err := os.MkdirAll(dp, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "config.json")
	if err := os.WriteFile(conf, []byte(`{"resourceList":[{"resourcePrefix":"example.com","resourceName":"sriov_rdma","selectors":[{"vendors":["15b3"],"pfNames":["enp65s0f0np0"],"isRdma":true}]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	k := &fakeKubelet{}
	prSock := filepath.Join(dir, "pod-resources.sock")
	serveGRPC(t, prSock, func(s *grpc.Server) { podresourcesapi.RegisterPodResourcesListerServer(s, k) })
	logPath := filepath.Join(dir, "agent.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(dir, "rdmanet-agent"), "--config="+conf, "--sysfs-root="+fix.Root, "--device-plugin-dir="+dp,
		"--devinfo-dir="+filepath.Join(dir, "devinfo"), "--rdma-netns-mode=exclusive", "--resync=100ms", "--log-format=json",
		"--metrics-addr=127.0.0.1:0", "--node-name=gpu-node-1", "--pod-resources-socket="+prSock)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("agent log:\n%s", b)
		}
	})
	base := endpointFromLog(t, logPath)
	kubeletSock := filepath.Join(dp, "kubelet.sock")
	labels := `{kind="exclusive",node="gpu-node-1",resource="example.com/sriov_rdma"}`
	regOK := `rdmanet_agent_kubelet_registrations_total{node="gpu-node-1",resource="example.com/sriov_rdma",result="ok"}`
	var kubelet *grpc.Server
	steps := []struct {
		name      string
		do        func()
		wantReady int
		wantBody  string
		want      map[string]float64
	}{
		{name: "kubelet away", do: func() {}, wantReady: 503,
			wantBody: "kubelet-registration: pool example.com/sriov_rdma is not registered: no kubelet registration socket at " + kubeletSock,
			want: map[string]float64{"rdmanet_agent_pool_devices" + labels: 4, "rdmanet_agent_pool_devices_healthy" + labels: 4,
				"rdmanet_agent_pool_registered" + labels: 0, `rdmanet_agent_ready{node="gpu-node-1"}`: 0, regOK: -1,
				"rdmanet_agent_pool_devices_allocated" + labels: 0, `rdmanet_agent_podresources_up{node="gpu-node-1"}`: 1}},
		{name: "kubelet starts", do: func() {
			kubelet = serveGRPC(t, kubeletSock, func(s *grpc.Server) { pluginapi.RegisterRegistrationServer(s, k) })
		}, wantReady: 200, wantBody: "ok",
			want: map[string]float64{"rdmanet_agent_pool_registered" + labels: 1, `rdmanet_agent_ready{node="gpu-node-1"}`: 1, regOK: 1,
				`rdmanet_agent_kubelet_restarts_total{node="gpu-node-1"}`: 0}},
		{name: "a VF allocated", do: func() {
			k.mu.Lock()
			k.alloc = []string{sysfsfixture.VFBDF(pfBDF, 2)}
			k.mu.Unlock()
		}, wantReady: 200, wantBody: "ok", want: map[string]float64{"rdmanet_agent_pool_devices_allocated" + labels: 1}},
		{name: "kubelet restarts", do: func() {
			kubelet.Stop()
			ents, _ := os.ReadDir(dp)
			for _, en := range ents { // kubelet's device manager wipes its dir when it starts
				_ = os.Remove(filepath.Join(dp, en.Name()))
			}
			time.Sleep(300 * time.Millisecond)
			kubelet = serveGRPC(t, kubeletSock, func(s *grpc.Server) { pluginapi.RegisterRegistrationServer(s, k) })
		}, wantReady: 200, wantBody: "ok", want: map[string]float64{regOK: 2, `rdmanet_agent_kubelet_restarts_total{node="gpu-node-1"}`: 1}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.do()
			var code int
			var body, page string
			ok := func() bool {
				if code != st.wantReady || body != st.wantBody {
					return false
				}
				for series, want := range st.want {
					if metricValue(page, series) != want {
						return false
					}
				}
				return true
			}
			for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				code, body = curl(t, nil, base+"/readyz")
				_, page = curl(t, nil, base+"/metrics")
				if ok() || time.Now().After(deadline) {
					break
				}
			}
			if !ok() {
				t.Fatalf("/readyz = %d %q, want %d %q; metrics want %v:\n%s", code, body, st.wantReady, st.wantBody, st.want, grepMetrics(page))
			}
			if code, body := curl(t, nil, base+"/healthz"); code != 200 || body != "ok" {
				t.Fatalf("/healthz = %d %q", code, body)
			}
		})
	}
}
