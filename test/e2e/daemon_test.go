package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rdmanet/rdmanet/test/netnsutil"
)

// startMetaDaemon runs rdmanet-daemon in the host namespace (as its
// DaemonSet would run) on the env's config, points the shim at it, and
// returns the daemon's log path. It stops with the test.
// RDMANET_E2E_DAEMON_FLAGS adds flags to every daemon (e.g.
// --in-process-plugins=false to measure the exec'd plugins).
func (e *env) startMetaDaemon(t testing.TB, flags ...string) string {
	t.Helper()
	flags = append(flags, strings.Fields(os.Getenv("RDMANET_E2E_DAEMON_FLAGS"))...)
	sock := filepath.Join(e.dir, "daemon.sock")
	e.conf["daemonSocket"] = sock
	confFile := filepath.Join(e.dir, "rdmanet.conf")
	raw, err := json.Marshal(e.conf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(confFile, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(e.dir, "daemon.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--config", confFile, "--node-name", nodeName, "--log-level", "debug",
		"--plugin-socket", filepath.Join(e.dir, "plugins.sock")}, flags...)
	cmd := exec.Command(filepath.Join(binDir, "rdmanet-daemon"), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	netnsutil.Do(t, e.host, cmd.Start)
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("daemon log:\n%s", b)
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			return logPath
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("daemon did not start:\n%s", b)
		}
	}
}

// eventualStatus polls the pod's network-status until it names n networks.
func (e *env) eventualStatus(t *testing.T, ns, name string, n int, limit time.Duration) []nadv1.NetworkStatus {
	t.Helper()
	var last string
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		p, err := e.core.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			continue
		}
		last = p.Annotations["k8s.v1.cni.cncf.io/network-status"]
		var st []nadv1.NetworkStatus
		if json.Unmarshal([]byte(last), &st) == nil && len(st) == n {
			return st
		}
	}
	t.Fatalf("pod %s/%s: network-status with %d networks did not appear within %s; last: %s", ns, name, n, limit, last)
	return nil
}

// TestDaemonSeedFlow: the seed's pod through the shim and the warm daemon,
// with concurrentNetworks: eth0 and net1 come up, network-status (written
// after ADD answered) names the VF, DEL returns the VF.
func TestDaemonSeedFlow(t *testing.T) {
	e := setup(t)
	pod := e.seedObjects("ai-daemon", "face-trainer-0")
	vf, rdmaDev := e.allocateVF("ai-daemon/face-trainer-0", 1)
	e.conf["concurrentNetworks"] = true
	logPath := e.startMetaDaemon(t)
	rt := e.rt("c-daemon", pod, "")
	if err := e.add(rt); err != nil {
		t.Fatal(err)
	}
	if links := netnsutil.Links(t, e.pod); !contains(links, "eth0") || !contains(links, "net1") {
		t.Fatalf("pod links %v, want eth0 and net1", links)
	}
	st := e.eventualStatus(t, "ai-daemon", "face-trainer-0", 2, 10*time.Second)
	if !st[0].Default || st[0].Interface != "eth0" || st[1].Interface != "net1" || st[1].DeviceInfo == nil ||
		st[1].DeviceInfo.Pci.PciAddress != vf || st[1].DeviceInfo.Pci.RdmaDevice != rdmaDev {
		t.Fatalf("network-status = %+v", st)
	}
	if err := e.del(rt); err != nil {
		t.Fatal(err)
	}
	if links := netnsutil.Links(t, e.pod); len(links) != 1 {
		t.Fatalf("after DEL the pod keeps %v", links)
	}
	e.assertVFHome(1)
	logText, _ := os.ReadFile(logPath)
	for _, want := range []string{`msg="ADD done"`, `msg="delegates added"`, "concurrent=true", `msg="network-status written"`} {
		if !strings.Contains(string(logText), want) {
			t.Fatalf("daemon log lacks %s:\n%s", want, logText)
		}
	}
}

// TestDaemonAddWhileAPIServerDown: the daemon answers ADD from its caches
// with the API server stopped; the network-status write waits and lands
// once the server is back.
func TestDaemonAddWhileAPIServerDown(t *testing.T) {
	e := setup(t)
	pod := e.seedObjects("ai-apidown", "face-trainer-0")
	vf, _ := e.allocateVF("ai-apidown/face-trainer-0", 2)
	e.startMetaDaemon(t)
	if err := e.api.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	restart := func() {
		if !restarted {
			restarted = true
			if err := e.api.RestartAPIServer(context.Background()); err != nil {
				t.Fatalf("restart API server: %v", err)
			}
		}
	}
	defer restart()
	rt := e.rt("c-apidown", pod, "")
	if err := e.add(rt); err != nil {
		t.Fatalf("ADD with the API server down must succeed from the daemon's caches: %v", err)
	}
	if links := netnsutil.Links(t, e.pod); !contains(links, "net1") {
		t.Fatalf("pod links %v, want net1", links)
	}
	restart()
	st := e.eventualStatus(t, "ai-apidown", "face-trainer-0", 2, 30*time.Second)
	if st[1].DeviceInfo == nil || st[1].DeviceInfo.Pci.PciAddress != vf {
		t.Fatalf("network-status = %+v", st)
	}
	if err := e.del(rt); err != nil {
		t.Fatal(err)
	}
	e.assertVFHome(2)
}

// flakySeedNAD is the seed NAD's chain (sriov → rdma) with the test plugin
// appended, whose DEL fails while marker exists: a DEL of the chain then
// stops before sriov's DEL, which keeps its record of the VF and refuses
// the VF to every other pod — the state a failed DEL used to strand.
func flakySeedNAD(t testing.TB, ns, marker string) *nadv1.NetworkAttachmentDefinition {
	var conf map[string]any
	if err := json.Unmarshal([]byte(seedNAD), &conf); err != nil {
		t.Fatal(err)
	}
	conf["name"] = "face-training-flaky"
	conf["plugins"] = append(conf["plugins"].([]any), map[string]any{"type": "testplugin", "failDelWhile": marker})
	b, err := json.Marshal(conf)
	if err != nil {
		t.Fatal(err)
	}
	return &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Name: "face-training-flaky", Namespace: ns,
		Annotations: map[string]string{"k8s.v1.cni.cncf.io/resourceName": resourceName}}, Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: string(b)}}
}

// TestDaemonRetriesFailedDelAndReleasesVF: a DEL that fails half way
// through the seed chain answers kubelet with success only after recording
// what is left; while it is left, the VF is refused to the next pod; the
// daemon retries with backoff, and once the retry succeeds the VF is home
// and the next pod gets it (defect 1).
func TestDaemonRetriesFailedDelAndReleasesVF(t *testing.T) {
	e := setup(t)
	e.seedObjects("ai-retry", "face-trainer-0") // namespace and seed NAD
	marker := filepath.Join(e.dir, "fail-del")
	nc, err := nadclient.NewForConfig(e.api.Config())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.K8sCniCncfIoV1().NetworkAttachmentDefinitions("ai-retry").Create(context.Background(), flakySeedNAD(t, "ai-retry", marker), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	first := e.podWithNetworks("ai-retry", "first", `[{"name":"face-training-flaky","interface":"net1"}]`)
	vf, _ := e.allocateVF("ai-retry/first", 1)
	logPath := e.startMetaDaemon(t, "--del-retry-interval=200ms", "--del-retry-backoff=500ms")
	rt := e.rt("c-first", first, "")
	if err := e.add(rt); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := e.del(rt); err != nil {
		t.Fatalf("DEL with the unfinished part recorded must succeed: %v", err)
	}
	if _, ok := netnsutil.Link(t, e.host, vfNetdev(1)); ok {
		t.Fatal("the VF came home although its chain's DEL failed")
	}
	rec := filepath.Join(e.dir, "cni", "cache", "c-first.json")
	if b, err := os.ReadFile(rec); err != nil || !strings.Contains(string(b), `"pending"`) {
		t.Fatalf("no pending record of the failed DEL (%v): %s", err, b)
	}
	// the symptom: sriov still holds the VF, so the next pod cannot have it
	second := e.podWithNetworks("ai-retry", "second", `[{"name":"face-training-rdma","interface":"net1"}]`)
	e.pr.devices["ai-retry/second"] = []string{vf}
	rt2 := e.rt("c-second", second, "")
	rt2.NetNS = netnsutil.NewNS(t).Path() // a sandbox of its own
	if err := e.add(rt2); err == nil || !strings.Contains(err.Error(), "is in use by container c-first") {
		t.Fatalf("next pod's ADD while the first pod's DEL is pending: %v, want the VF refused as in use by c-first", err)
	}
	// the failure goes away: the daemon's retry removes the rest and the VF is released
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(rec); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("the daemon did not complete the pending DEL:\n%s", b)
		}
	}
	e.assertVFHome(1)
	if err := e.add(rt2); err != nil {
		t.Fatalf("the next pod still cannot have the released VF: %v", err)
	}
	if err := e.del(rt2); err != nil {
		t.Fatal(err)
	}
	e.assertVFHome(1)
	logText, _ := os.ReadFile(logPath)
	for _, want := range []string{`msg="DEL incomplete: what is left is recorded`, `msg="delegate DEL retry succeeded"`, `msg="pending DEL completed`} {
		if !strings.Contains(string(logText), want) {
			t.Errorf("daemon log lacks %s", want)
		}
	}
}
