package cluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Supervisor runs one node: inside the node's private mount namespace (the
// process was started with CLONE_NEWNS, so "/" is already private) and in
// the machine's network namespace; it starts the node's processes in the
// node's network namespace. The first node's supervisor also forwards a
// port of the machine's loopback to the API server.
type Supervisor struct {
	l       Layout
	n       Node
	node    *netnsHandle
	log     *slog.Logger
	fwdAddr string

	mu    sync.Mutex
	procs map[string]*proc
	comps map[string]component
	order []string
}

type proc struct {
	cmd     *exec.Cmd
	done    chan struct{}
	started time.Time
	ready   bool
}

// Supervise sets up the mounts, starts every component in order and serves
// the control socket until it is told to shut down (or gets SIGTERM).
func Supervise(ctx context.Context, l Layout, nodeName, fwdAddr string, log *slog.Logger) error {
	nodes, err := l.readNodes()
	if err != nil {
		return err
	}
	n, err := FindNode(nodes, nodeName)
	if err != nil {
		return err
	}
	node, err := openNetns(filepath.Join("/run/netns", n.Netns))
	if err != nil {
		return err
	}
	if !n.ControlPlane() {
		fwdAddr = ""
	}
	log = log.With("node", n.Name)
	s := &Supervisor{l: l, n: n, node: node, log: log, fwdAddr: fwdAddr, procs: map[string]*proc{}, comps: map[string]component{}}
	for _, c := range components(l, n) {
		s.comps[c.name] = c
		s.order = append(s.order, c.name)
	}
	if err := s.mountPrivate(); err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer cancel()

	sock := l.NodeControlSocket(n)
	lis, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("control socket %s: %w", sock, err)
	}
	defer os.Remove(sock)
	var fwd net.Listener
	if fwdAddr != "" {
		if fwd, err = net.Listen("tcp", fwdAddr); err != nil {
			return fmt.Errorf("API server port on the machine's loopback %s: %w", fwdAddr, err)
		}
		go s.forward(ctx, fwd)
	}

	shutdown := make(chan struct{})
	var once sync.Once
	srv := &http.Server{Handler: s.handler(func() { once.Do(func() { close(shutdown) }) })}
	go func() { _ = srv.Serve(lis) }()

	go func() {
		for _, name := range s.order {
			if err := s.start(ctx, name); err != nil {
				s.log.Error("start failed", "component", name, "err", err)
				return
			}
		}
		s.log.Info("node up")
	}()

	select {
	case <-ctx.Done():
	case <-shutdown:
	}
	if fwd != nil {
		fwd.Close()
	}
	s.stopAll()
	_ = srv.Close()
	return nil
}

// mountPrivate bind-mounts the node's own directories over their standard
// paths and makes the tree shared inside this namespace (kubelet and
// mountPropagation: HostToContainer need shared mounts; the namespace itself
// is private to the machine).
func (s *Supervisor) mountPrivate() error {
	for _, m := range PrivateMounts {
		src := s.l.NodeDir(s.n, m.Source)
		if err := unix.Mount(src, m.Target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind mount %s on %s: %w", src, m.Target, err)
		}
	}
	if err := unix.Mount("", "/", "", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("make / rshared in the node's mount namespace: %w", err)
	}
	return nil
}

// start starts one component and waits for its health check.
func (s *Supervisor) start(ctx context.Context, name string) error {
	c, ok := s.comps[name]
	if !ok {
		return fmt.Errorf("unknown component %q (known: %s)", name, strings.Join(s.order, ", "))
	}
	bin := s.l.binary(c.bin)
	if !fileExists(bin) {
		if c.optional {
			s.log.Warn("optional component not built; the node runs without it", "component", name, "path", bin)
			return nil
		}
		return fmt.Errorf("%s: binary %s missing; fix: run make cluster-up (it builds the tools)", name, bin)
	}
	logf, err := os.OpenFile(s.l.NodeLog(s.n, name), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("%s log: %w", name, err)
	}
	cmd := exec.Command(bin, c.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "PATH="+s.l.Tools()+":"+os.Getenv("PATH"))
	cmd.Env = append(cmd.Env, c.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	fmt.Fprintf(logf, "==== %s starting %s %s\n", time.Now().Format(time.RFC3339), bin, strings.Join(c.args, " "))
	if err := s.node.start(cmd); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{}), started: time.Now()}
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(logf, "==== %s exited: %v\n", time.Now().Format(time.RFC3339), err)
		logf.Close()
		close(p.done)
	}()
	s.mu.Lock()
	s.procs[name] = p
	s.mu.Unlock()
	s.log.Info("started", "component", name, "pid", cmd.Process.Pid)
	if c.health == "" {
		s.setReady(p)
		return nil
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		err := s.check(ctx, c.health)
		if err == nil {
			s.setReady(p)
			s.log.Info("ready", "component", name, "after", time.Since(p.started).Round(time.Millisecond))
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before it was healthy; see %s", name, s.l.NodeLog(s.n, name))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not healthy after 3m (%s: %v); see %s", name, c.health, err, s.l.NodeLog(s.n, name))
		}
	}
}

func (s *Supervisor) setReady(p *proc) {
	s.mu.Lock()
	p.ready = true
	s.mu.Unlock()
}

// check probes a health endpoint from inside the node.
func (s *Supervisor) check(ctx context.Context, target string) error {
	if strings.HasPrefix(target, "unix:") {
		c, err := net.DialTimeout("unix", strings.TrimPrefix(target, "unix:"), time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	}
	client, err := s.nodeHTTPClient()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s %s", target, resp.Status, strings.TrimSpace(string(b)))
	}
	return nil
}

// nodeHTTPClient dials inside the node and presents the admin certificate
// (the kube components' own health endpoints accept any authenticated
// client for /healthz; the API server's /readyz too).
func (s *Supervisor) nodeHTTPClient() (*http.Client, error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(s.l.PKI(), "admin.crt"), filepath.Join(s.l.PKI(), "admin.key"))
	if err != nil {
		return nil, fmt.Errorf("admin certificate: %w", err)
	}
	return &http.Client{Transport: &http.Transport{
		DialContext: s.node.dial,
		// Health probes only: controller-manager and scheduler serve
		// self-signed certificates, so no server certificate is checked.
		TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true},
	}}, nil
}

// stop stops one component: SIGTERM to its process group, SIGKILL after
// the grace period.
func (s *Supervisor) stop(name string, grace time.Duration) error {
	s.mu.Lock()
	p := s.procs[name]
	delete(s.procs, name)
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	s.log.Info("stopped", "component", name)
	return nil
}

// stopAll stops the node in reverse order. Pods are removed by the caller
// (cluster-down deletes them through the API while kubelet still runs);
// whatever containerd still runs is killed with its shims.
func (s *Supervisor) stopAll() {
	for i := len(s.order) - 1; i >= 0; i-- {
		name := s.order[i]
		if name == "containerd" {
			s.killTasks()
		}
		_ = s.stop(name, 20*time.Second)
		if name == "containerd" {
			s.killShims()
		}
	}
}

// crash SIGKILLs every process in the node's network namespace but the
// supervisor, components first.
func (s *Supervisor) crash() {
	s.mu.Lock()
	for _, p := range s.procs {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	s.mu.Unlock()
	s.killShims()
	s.log.Warn("crashed: every process of the node killed")
}

// killTasks removes every CRI container and sandbox that is left.
func (s *Supervisor) killTasks() {
	ctr := s.l.binary("ctr")
	out, err := exec.Command(ctr, "--address", ContainerdSocket, "-n", "k8s.io", "tasks", "ls", "-q").Output()
	if err != nil {
		return
	}
	for _, id := range strings.Fields(string(out)) {
		_ = exec.Command(ctr, "--address", ContainerdSocket, "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", id).Run()
	}
}

// killShims kills processes that still run in the node's network namespace
// after containerd stopped (shims outlive containerd when tasks run).
func (s *Supervisor) killShims() {
	for _, pid := range processesInNetns(s.node.f) {
		if pid == os.Getpid() {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// forward accepts on the machine's loopback and splices each connection to
// the API server inside the node.
func (s *Supervisor) forward(ctx context.Context, lis net.Listener) {
	target := fmt.Sprintf("%s:%d", NodeIP, APIPort)
	for {
		c, err := lis.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			u, err := s.node.dial(ctx, "tcp", target)
			if err != nil {
				s.log.Warn("forward: dial API server", "err", err)
				return
			}
			defer u.Close()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(u, c); done <- struct{}{} }()
			go func() { _, _ = io.Copy(c, u); done <- struct{}{} }()
			<-done
		}()
	}
}

// Status is the supervisor's view of the node.
type Status struct {
	Node       string            `json:"node"`
	PID        int               `json:"pid"`
	Forward    string            `json:"forward"`
	Components []ComponentStatus `json:"components"`
}

type ComponentStatus struct {
	Name     string `json:"name"`
	Optional bool   `json:"optional,omitempty"`
	PID      int    `json:"pid,omitempty"`
	Running  bool   `json:"running"`
	Ready    bool   `json:"ready"`
	Since    string `json:"since,omitempty"`
}

func (s *Supervisor) status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{Node: s.n.Name, PID: os.Getpid(), Forward: s.fwdAddr}
	for _, name := range s.order {
		cs := ComponentStatus{Name: name, Optional: s.comps[name].optional}
		if p := s.procs[name]; p != nil {
			select {
			case <-p.done:
			default:
				cs.Running = true
			}
			cs.PID = p.cmd.Process.Pid
			cs.Ready = p.ready && cs.Running
			cs.Since = p.started.Format(time.RFC3339)
		}
		st.Components = append(st.Components, cs)
	}
	return st
}

// handler serves the control API:
//
//	GET  /status                      components, pids, readiness
//	POST /restart?name=kubelet        stop (SIGTERM, 20 s) and start again, wait healthy
//	POST /stop?name=... | /start?name=...
//	POST /import?path=<archive>       ctr -n k8s.io images import
//	POST /exec  {"argv": [...]}       run a command in the node (its namespaces), return output
//	POST /shutdown
func (s *Supervisor) handler(shutdown func()) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.status())
	})
	mux.HandleFunc("POST /restart", func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Query().Get("name")
		if _, ok := s.comps[name]; !ok {
			http.Error(w, fmt.Sprintf("unknown component %q", name), http.StatusBadRequest)
			return
		}
		_ = s.stop(name, 20*time.Second)
		if err := s.start(r.Context(), name); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, "%s restarted\n", name)
	})
	mux.HandleFunc("POST /stop", func(w http.ResponseWriter, r *http.Request) {
		_ = s.stop(r.URL.Query().Get("name"), 20*time.Second)
	})
	mux.HandleFunc("POST /start", func(w http.ResponseWriter, r *http.Request) {
		if err := s.start(r.Context(), r.URL.Query().Get("name")); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	mux.HandleFunc("POST /import", func(w http.ResponseWriter, r *http.Request) {
		path := r.URL.Query().Get("path")
		out, err := s.run(r.Context(), s.l.binary("ctr"), "--address", ContainerdSocket, "-n", "k8s.io", "images", "import", path)
		if err != nil {
			http.Error(w, fmt.Sprintf("import %s: %v\n%s", path, err, out), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write(out)
	})
	mux.HandleFunc("POST /exec", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Argv []string `json:"argv"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Argv) == 0 {
			http.Error(w, "want {\"argv\": [...]}", http.StatusBadRequest)
			return
		}
		out, err := s.run(r.Context(), req.Argv[0], req.Argv[1:]...)
		if err != nil {
			w.WriteHeader(http.StatusUnprocessableEntity)
			fmt.Fprintf(w, "%s\nerror: %v\n", out, err)
			return
		}
		_, _ = w.Write(out)
	})
	mux.HandleFunc("POST /shutdown", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("crash") == "1" {
			// A machine that loses power: every process of the node
			// (components, shims, pods) is killed at once, nothing is
			// stopped in order and no pod's CNI DEL runs.
			s.crash()
		}
		fmt.Fprintln(w, "shutting down")
		shutdown()
	})
	return mux
}

// run runs a short command in the node's namespaces.
func (s *Supervisor) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "PATH="+s.l.Tools()+":"+os.Getenv("PATH"))
	var buf strings.Builder
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := s.node.start(cmd); err != nil {
		return nil, err
	}
	err := cmd.Wait()
	return []byte(buf.String()), err
}

// processesInNetns lists the pids whose network namespace is the open one.
func processesInNetns(f *os.File) []int {
	var want unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &want); err != nil {
		return nil
	}
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		var st unix.Stat_t
		if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st); err != nil {
			continue
		}
		if st.Ino == want.Ino && st.Dev == want.Dev {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	return pids
}
