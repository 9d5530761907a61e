// Package apiserver starts a real etcd and kube-apiserver for tests, from the
// binaries hack/build-k8s-tools.sh builds into .tools/bin. It returns a
// *rest.Config with cluster-admin rights (client certificate in
// system:masters), installs CRDs, and can stop and restart the API server
// (same port, same etcd) for fault tests.
//
// Tests call StartT (own server) or Shared (one server per test binary).
// Without the binaries they skip with the command that builds them; with
// CI=true they fail instead.
package apiserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// ErrBinariesMissing means etcd or kube-apiserver is not built.
var ErrBinariesMissing = errors.New("kube-apiserver/etcd binaries not found")

// Environment overrides.
const (
	EnvToolsBin      = "RDMANET_TOOLS_BIN" // directory holding etcd and kube-apiserver
	EnvKubeAPIServer = "KUBE_APISERVER_BIN"
	EnvEtcd          = "ETCD_BIN"
)

// Binaries are the executables the harness runs.
type Binaries struct {
	KubeAPIServer string
	Etcd          string
}

// RepoRoot returns the rdmanet checkout containing the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			bytes.HasPrefix(bytes.TrimSpace(data), []byte("module github.com/rdmanet/rdmanet\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the rdmanet repository")
		}
		dir = parent
	}
}

// CRDDir is the repository's deploy/crds directory.
func CRDDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "deploy", "crds"), nil
}

// toolDirs are the directories searched for tool binaries, in order:
// $RDMANET_TOOLS_BIN, $TOOLS_BIN, <repo>/.tools/bin.
func toolDirs() []string {
	var dirs []string
	for _, e := range []string{EnvToolsBin, "TOOLS_BIN"} {
		if v := os.Getenv(e); v != "" {
			dirs = append(dirs, v)
		}
	}
	if root, err := RepoRoot(); err == nil {
		dirs = append(dirs, filepath.Join(root, ".tools", "bin"))
	}
	return dirs
}

// FindBinaries locates etcd and kube-apiserver: $KUBE_APISERVER_BIN/$ETCD_BIN,
// then $RDMANET_TOOLS_BIN, $TOOLS_BIN, then <repo>/.tools/bin.
func FindBinaries() (Binaries, error) {
	dirs := toolDirs()
	find := func(env, name string) string {
		if v := os.Getenv(env); v != "" {
			if st, err := os.Stat(v); err == nil && st.Mode()&0o111 != 0 {
				return v
			}
			dirs = append(dirs, "$"+env+"="+v+" (not an executable)")
			return ""
		}
		for _, d := range dirs {
			p := filepath.Join(d, name)
			if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
				return p
			}
		}
		return ""
	}
	b := Binaries{KubeAPIServer: find(EnvKubeAPIServer, "kube-apiserver"), Etcd: find(EnvEtcd, "etcd")}
	if b.KubeAPIServer == "" || b.Etcd == "" {
		return b, fmt.Errorf("%w (looked in %s); build them with: hack/build-k8s-tools.sh (or make k8s-tools)",
			ErrBinariesMissing, strings.Join(dirs, ", "))
	}
	return b, nil
}

// Server is a running etcd + kube-apiserver pair.
type Server struct {
	dir      string
	bins     Binaries
	certs    *certs
	etcdPort int
	apiPort  int
	etcd     *exec.Cmd
	api      *exec.Cmd
	apiDone  chan struct{}
	etcdDone chan struct{}
	cfg      *rest.Config
	// extraArgs are appended to kube-apiserver's command line (StartArgs).
	extraArgs []string
}

// Start starts etcd and kube-apiserver in a fresh temporary directory and
// waits until the API server is ready.
func Start(ctx context.Context) (*Server, error) {
	return StartArgs(ctx)
}

// StartArgs is Start with extra kube-apiserver flags (e.g. a fleet
// benchmark's --max-requests-inflight); they apply to restarts too.
func StartArgs(ctx context.Context, apiserverArgs ...string) (*Server, error) {
	bins, err := FindBinaries()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "rdmanet-apiserver-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, bins: bins, extraArgs: apiserverArgs}
	if err := s.start(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) start(ctx context.Context) error {
	var err error
	if s.certs, err = writeCerts(s.dir); err != nil {
		return fmt.Errorf("apiserver: certificates: %w", err)
	}
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	s.etcdPort, s.apiPort = ports[0], ports[1]
	if err := s.startEtcd(ctx, ports[2]); err != nil {
		return err
	}
	return s.StartAPIServer(ctx)
}

func (s *Server) startEtcd(ctx context.Context, peerPort int) error {
	client := fmt.Sprintf("http://127.0.0.1:%d", s.etcdPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	cmd := exec.Command(s.bins.Etcd,
		"--name=default",
		"--data-dir="+filepath.Join(s.dir, "etcd"),
		"--listen-client-urls="+client,
		"--advertise-client-urls="+client,
		"--listen-peer-urls="+peer,
		"--initial-advertise-peer-urls="+peer,
		"--initial-cluster=default="+peer,
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	)
	done, err := s.run(cmd, "etcd.log")
	if err != nil {
		return err
	}
	s.etcd, s.etcdDone = cmd, done
	// Ready when /health answers.
	return waitFor(ctx, 60*time.Second, done, filepath.Join(s.dir, "etcd.log"), func() bool {
		resp, err := http.Get(client + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// StartAPIServer starts kube-apiserver (again) on the server's port and waits
// until /readyz is OK.
func (s *Server) StartAPIServer(ctx context.Context) error {
	if s.api != nil {
		return errors.New("apiserver: kube-apiserver is already running")
	}
	c := s.certs
	args := []string{
		"--etcd-servers=" + fmt.Sprintf("http://127.0.0.1:%d", s.etcdPort),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(s.apiPort),
		"--cert-dir=" + filepath.Join(s.dir, "certs"),
		"--tls-cert-file=" + c.servingCert,
		"--tls-private-key-file=" + c.servingKey,
		"--client-ca-file=" + c.caCert,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.saPub,
		"--service-account-signing-key-file=" + c.saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--authorization-mode=RBAC",
		"--disable-admission-plugins=ServiceAccount",
		"--allow-privileged=true",
		"--endpoint-reconciler-type=none",
		"--profiling=false",
		"--v=0",
	}
	cmd := exec.Command(s.bins.KubeAPIServer, append(args, s.extraArgs...)...)
	done, err := s.run(cmd, "kube-apiserver.log")
	if err != nil {
		return err
	}
	s.api, s.apiDone = cmd, done
	s.cfg = &rest.Config{
		Host: fmt.Sprintf("https://127.0.0.1:%d", s.apiPort),
		TLSClientConfig: rest.TLSClientConfig{
			CAFile: c.caCert, CertFile: c.clientCert, KeyFile: c.clientKey,
		},
		QPS: -1, Burst: -1,
	}
	rc := rest.CopyConfig(s.cfg)
	rc.Timeout = 5 * time.Second
	client, err := rest.UnversionedRESTClientFor(withCodec(rc))
	if err != nil {
		return err
	}
	return waitFor(ctx, 120*time.Second, done, filepath.Join(s.dir, "kube-apiserver.log"), func() bool {
		body, err := client.Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok"
	})
}

// StopAPIServer stops kube-apiserver, leaving etcd (and the data) running.
func (s *Server) StopAPIServer() error {
	if s.api == nil {
		return nil
	}
	err := stop(s.api, s.apiDone)
	s.api, s.apiDone = nil, nil
	return err
}

// RestartAPIServer stops and starts kube-apiserver on the same port.
func (s *Server) RestartAPIServer(ctx context.Context) error {
	if err := s.StopAPIServer(); err != nil {
		return err
	}
	return s.StartAPIServer(ctx)
}

// Config returns a cluster-admin client config (a copy).
func (s *Server) Config() *rest.Config { return rest.CopyConfig(s.cfg) }

// Dir is the server's temporary directory (certificates, logs, etcd data).
func (s *Server) Dir() string { return s.dir }

// Stop stops both processes and removes the temporary directory.
func (s *Server) Stop() {
	_ = s.StopAPIServer()
	if s.etcd != nil {
		_ = stop(s.etcd, s.etcdDone)
		s.etcd = nil
	}
	if s.dir != "" && os.Getenv("RDMANET_KEEP_APISERVER_DIR") == "" {
		_ = os.RemoveAll(s.dir)
	}
}

func (s *Server) run(cmd *exec.Cmd, logName string) (chan struct{}, error) {
	logf, err := os.OpenFile(filepath.Join(s.dir, logName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group, and die with the test binary. Pdeathsig fires when
	// the *thread* that forked the child exits, and Go retires threads (a
	// goroutine that ends while locked to its thread, as the netns helpers'
	// do, takes the thread with it). So the child is started from a thread
	// locked for exactly the child's lifetime.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	if err := <-started; err != nil {
		logf.Close()
		return nil, fmt.Errorf("apiserver: start %s: %w", cmd.Path, err)
	}
	return done, nil
}

func stop(cmd *exec.Cmd, done chan struct{}) error {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
		return nil
	case <-time.After(20 * time.Second):
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
	return nil
}

// waitFor polls ok until it is true, the process exits, or the deadline passes.
func waitFor(ctx context.Context, limit time.Duration, exited chan struct{}, logPath string, ok func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		if ok() {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("apiserver: process exited during startup; log %s:\n%s", logPath, tail(logPath, 30))
		case <-ctx.Done():
			return fmt.Errorf("apiserver: not ready after %s; log %s:\n%s", limit, logPath, tail(logPath, 30))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("apiserver: free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// StartT starts a server for one test and stops it in t.Cleanup. Without
// binaries it skips, or fails when CI=true.
func StartT(t testing.TB) *Server {
	t.Helper()
	requireBinaries(t)
	s, err := Start(context.Background())
	if err != nil {
		t.Fatalf("start kube-apiserver: %v", err)
	}
	t.Cleanup(s.Stop)
	if err := s.ApplyCRDs(context.Background()); err != nil {
		t.Fatalf("install CRDs: %v", err)
	}
	return s
}

var (
	sharedMu  sync.Mutex
	shared    *Server
	sharedErr error
)

// Shared returns one server (CRDs installed) for the whole test binary,
// started on first use. Call StopShared from TestMain after m.Run.
func Shared(t testing.TB) *Server {
	t.Helper()
	requireBinaries(t)
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil && sharedErr == nil {
		shared, sharedErr = Start(context.Background())
		if sharedErr == nil {
			sharedErr = shared.ApplyCRDs(context.Background())
		}
	}
	if sharedErr != nil {
		t.Fatalf("start shared kube-apiserver: %v", sharedErr)
	}
	return shared
}

// StopShared stops the server Shared started, if any.
func StopShared() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		shared.Stop()
		shared = nil
	}
}

func requireBinaries(t testing.TB) {
	t.Helper()
	if _, err := FindBinaries(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and the apiserver tier cannot run: %v", err)
		}
		t.Skipf("skipping apiserver-tier test: %v", err)
	}
}
