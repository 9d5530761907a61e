package apiserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ErrComponentMissing means kube-scheduler or kube-controller-manager is
// not built.
var ErrComponentMissing = errors.New("control-plane binary not found")

// Environment overrides of the control-plane binaries.
const (
	EnvKubeScheduler         = "KUBE_SCHEDULER_BIN"
	EnvKubeControllerManager = "KUBE_CONTROLLER_MANAGER_BIN"
)

// Component is a control-plane binary (kube-scheduler,
// kube-controller-manager) running against a Server with the server's
// admin identity, leader election off. Its log is in the server's
// directory.
type Component struct {
	Name string
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// FindComponent locates a control-plane binary (name "kube-scheduler" or
// "kube-controller-manager"): $env, then the directories FindBinaries
// searches ($RDMANET_TOOLS_BIN, $TOOLS_BIN, <repo>/.tools/bin).
func FindComponent(name, env string) (string, error) {
	if v := os.Getenv(env); v != "" {
		if st, err := os.Stat(v); err == nil && st.Mode()&0o111 != 0 {
			return v, nil
		}
		return "", fmt.Errorf("%w: $%s=%s is not an executable", ErrComponentMissing, env, v)
	}
	dirs := toolDirs()
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: %s (looked in %s); build it with: hack/build-k8s-tools.sh (or make k8s-tools)",
		ErrComponentMissing, name, strings.Join(dirs, ", "))
}

// StartScheduler runs the real kube-scheduler against the server (default
// profile, leader election off, HTTPS on a free local port for /readyz)
// and waits until it is ready: its informers have synced, so it schedules
// what the test creates next.
func (s *Server) StartScheduler(ctx context.Context) (*Component, error) {
	return s.startComponent(ctx, "kube-scheduler", EnvKubeScheduler, "/readyz")
}

// StartControllerManager runs the real kube-controller-manager with only
// the named controllers (e.g. "resourceclaim-controller", which turns a
// pod's ResourceClaimTemplates into ResourceClaims) and waits until
// /healthz answers.
func (s *Server) StartControllerManager(ctx context.Context, controllers ...string) (*Component, error) {
	if len(controllers) == 0 {
		return nil, errors.New("apiserver: kube-controller-manager: name the controllers to run")
	}
	return s.startComponent(ctx, "kube-controller-manager", EnvKubeControllerManager, "/healthz",
		"--controllers="+strings.Join(controllers, ","))
}

func (s *Server) startComponent(ctx context.Context, name, env, ready string, extra ...string) (*Component, error) {
	bin, err := FindComponent(name, env)
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(s.dir, name+".kubeconfig")
	if err := s.WriteKubeconfig(kubeconfig); err != nil {
		return nil, fmt.Errorf("apiserver: %s kubeconfig: %w", name, err)
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	certDir := filepath.Join(s.dir, name+"-certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, err
	}
	args := append([]string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[0]),
		"--cert-dir=" + certDir,
		"--profiling=false",
		"--v=2",
	}, extra...)
	cmd := exec.Command(bin, args...)
	logName := name + ".log"
	done, err := s.run(cmd, logName)
	if err != nil {
		return nil, err
	}
	c := &Component{Name: name, cmd: cmd, done: done, log: filepath.Join(s.dir, logName)}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		// The component's self-signed serving certificate; only its
		// always-allowed health path is read.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // local health probe
	}}
	url := fmt.Sprintf("https://127.0.0.1:%d%s", ports[0], ready)
	err = waitFor(ctx, 60*time.Second, done, c.log, func() bool {
		resp, err := client.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if err != nil {
		c.Stop()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

// Stop stops the component (SIGTERM, then SIGKILL).
func (c *Component) Stop() {
	if c == nil || c.cmd == nil {
		return
	}
	_ = stop(c.cmd, c.done)
	c.cmd = nil
}

// Log is the path of the component's log.
func (c *Component) Log() string { return c.log }

// LogTail returns the last n lines of the component's log, for failure
// messages.
func (c *Component) LogTail(n int) string { return tail(c.log, n) }

// SchedulerT starts kube-scheduler against s for one test and stops it in
// t.Cleanup. Without the binary it skips, or fails when CI=true.
func SchedulerT(t testing.TB, s *Server) *Component {
	t.Helper()
	requireComponent(t, "kube-scheduler", EnvKubeScheduler)
	c, err := s.StartScheduler(context.Background())
	if err != nil {
		t.Fatalf("start kube-scheduler: %v", err)
	}
	t.Cleanup(c.Stop)
	return c
}

// ControllerManagerT starts kube-controller-manager with the named
// controllers against s for one test and stops it in t.Cleanup. Without
// the binary it skips, or fails when CI=true.
func ControllerManagerT(t testing.TB, s *Server, controllers ...string) *Component {
	t.Helper()
	requireComponent(t, "kube-controller-manager", EnvKubeControllerManager)
	c, err := s.StartControllerManager(context.Background(), controllers...)
	if err != nil {
		t.Fatalf("start kube-controller-manager: %v", err)
	}
	t.Cleanup(c.Stop)
	return c
}

func requireComponent(t testing.TB, name, env string) {
	t.Helper()
	if _, err := FindComponent(name, env); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and the scheduler tier cannot run: %v", err)
		}
		t.Skipf("skipping test that needs %s: %v", name, err)
	}
}
