package burstbench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
)

// Daemon is one running node daemon (rdmanet-daemon or multus-daemon) in
// the node's host namespace.
type Daemon struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	logf    *os.File
	done    chan struct{}
	stopSig os.Signal
	metrics string // URL of its Prometheus /metrics inside the host namespace
	http    *http.Client
}

// startDaemon starts cmd in host with its output in logPath; the daemon is
// stopped (stopSig, then SIGKILL after 30 s) at t's cleanup at the latest.
func startDaemon(t testing.TB, host ns.NetNS, name string, cmd *exec.Cmd, logPath, metricsURL string, stopSig os.Signal) *Daemon {
	t.Helper()
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	d := &Daemon{Name: name, LogPath: logPath, cmd: cmd, logf: logf, done: make(chan struct{}), stopSig: stopSig, metrics: metricsURL, http: hostHTTP(host)}
	if err := host.Do(func(ns.NetNS) error { return cmd.Start() }); err != nil {
		logf.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { _ = cmd.Wait(); close(d.done) }()
	t.Cleanup(d.Stop)
	return d
}

// Pid is the daemon's process ID.
func (d *Daemon) Pid() int { return d.cmd.Process.Pid }

// Exited reports whether the daemon has exited.
func (d *Daemon) Exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// Stop stops the daemon and waits for it (idempotent).
func (d *Daemon) Stop() {
	if !d.Exited() {
		_ = d.cmd.Process.Signal(d.stopSig)
		select {
		case <-d.done:
		case <-time.After(30 * time.Second):
			_ = d.cmd.Process.Kill()
			<-d.done
		}
	}
	d.logf.Close()
}

// LogTail is the end of the daemon's log.
func (d *Daemon) LogTail(n int) string {
	b, _ := os.ReadFile(d.LogPath)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// Goroutines reads go_goroutines from the daemon's /metrics.
func (d *Daemon) Goroutines() (int, error) {
	resp, err := d.http.Get(d.metrics)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int(f), err
		}
	}
	return 0, fmt.Errorf("%s: no go_goroutines in %s (status %s)", d.Name, d.metrics, resp.Status)
}

// waitMetrics waits until the daemon's /metrics answers.
func (d *Daemon) waitMetrics(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		_, err := d.Goroutines()
		if err == nil {
			return nil
		}
		if d.Exited() || time.Now().After(deadline) {
			return fmt.Errorf("%s: metrics at %s: %w; log:\n%s", d.Name, d.metrics, err, d.LogTail(3000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// hostHTTP is an HTTP client whose connections are made inside host.
func hostHTTP(host ns.NetNS) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := host.Do(func(ns.NetNS) error {
				var err error
				c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
		MaxIdleConns: 2,
	}}
}

// freePort returns a TCP port free on 127.0.0.1 inside host.
func freePort(t testing.TB, host ns.NetNS) int {
	t.Helper()
	var port int
	if err := host.Do(func(ns.NetNS) error {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		port = l.Addr().(*net.TCPAddr).Port
		return l.Close()
	}); err != nil {
		t.Fatal(err)
	}
	return port
}

// ProcStat is what /proc/<pid>/status and /proc/<pid>/stat say about a process.
type ProcStat struct {
	HWM      int64         // VmHWM: peak resident set size, bytes
	RSS      int64         // VmRSS, bytes
	CPU      time.Duration // utime + stime
	ChildCPU time.Duration // cutime + cstime (children waited for)
}

// clockTick is USER_HZ, the unit of /proc/<pid>/stat's times (100 on
// every Linux architecture Go supports).
const clockTick = 10 * time.Millisecond

// ReadProc reads pid's memory peak and CPU times.
func ReadProc(pid int) (ProcStat, error) {
	var s ProcStat
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	if s.HWM, err = statusKB(status, "VmHWM:"); err != nil {
		return s, err
	}
	if s.RSS, err = statusKB(status, "VmRSS:"); err != nil {
		return s, err
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	return s, parseStat(stat, &s)
}

// statusKB reads a "Key:   123 kB" line of /proc/<pid>/status, in bytes.
func statusKB(status []byte, key string) (int64, error) {
	for _, line := range bytes.Split(status, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte(key)); ok {
			f := strings.Fields(string(v))
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("/proc status line %q: want \"%s <n> kB\"", line, key)
			}
			n, err := strconv.ParseInt(f[0], 10, 64)
			return n << 10, err
		}
	}
	return 0, fmt.Errorf("/proc status has no %s line", key)
}

// parseStat reads utime, stime, cutime and cstime (fields 14–17) of a
// /proc/<pid>/stat line; the command name (field 2) may contain spaces and
// parentheses, so fields are counted after its last ')'.
func parseStat(stat []byte, s *ProcStat) error {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return fmt.Errorf("/proc stat %q: no ')'", stat)
	}
	f := strings.Fields(string(stat[i+1:])) // f[0] is field 3 (state)
	if len(f) < 15 {
		return fmt.Errorf("/proc stat %q: %d fields after the name, want ≥ 15", stat, len(f))
	}
	var ticks [4]int64
	for k := range ticks {
		n, err := strconv.ParseInt(f[11+k], 10, 64)
		if err != nil {
			return fmt.Errorf("/proc stat field %d %q: %w", 14+k, f[11+k], err)
		}
		ticks[k] = n
	}
	s.CPU = time.Duration(ticks[0]+ticks[1]) * clockTick
	s.ChildCPU = time.Duration(ticks[2]+ticks[3]) * clockTick
	return nil
}

// sampler polls the daemon's goroutines while a burst runs and keeps the
// highest value.
type sampler struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	max  int
	errs int
}

func sample(d *Daemon, every time.Duration) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if g, err := d.Goroutines(); err == nil {
				s.mu.Lock()
				s.max = max(s.max, g)
				s.mu.Unlock()
			} else {
				s.mu.Lock()
				s.errs++
				s.mu.Unlock()
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// Stop ends the sampling and returns the highest goroutine count seen and
// how many samples failed.
func (s *sampler) Stop() (peak, failed int) {
	close(s.stop)
	<-s.done
	return s.max, s.errs
}
