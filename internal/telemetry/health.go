package telemetry

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// Check is one condition of /healthz or /readyz: Fn returns nil when it
// holds, else why not (a short sentence naming what is missing).
type Check struct {
	Name string
	Fn   func() error
}

// Checks answers a probe: 200 and "ok" when every check holds, else 503
// and one line "<name>: <why>" per check that does not. With ?verbose
// every check gets a line ("[+]name ok" or "[-]name: why"), as
// kube-apiserver's probes print them.
type Checks []Check

// Failures runs every check and returns the lines of those that fail.
func (cs Checks) Failures() []string {
	var out []string
	for _, c := range cs {
		if err := c.Fn(); err != nil {
			out = append(out, c.Name+": "+err.Error())
		}
	}
	return out
}

func (cs Checks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	_, verbose := r.URL.Query()["verbose"]
	var b strings.Builder
	failed, mark := false, ""
	if verbose {
		mark = "[-]"
	}
	for _, c := range cs {
		err := c.Fn()
		switch {
		case err != nil:
			failed = true
			fmt.Fprintf(&b, "%s%s: %v\n", mark, c.Name, err)
		case verbose:
			fmt.Fprintf(&b, "[+]%s ok\n", c.Name)
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	if failed {
		w.WriteHeader(http.StatusServiceUnavailable)
	} else {
		b.WriteString("ok\n")
	}
	_, _ = w.Write([]byte(b.String()))
}

// Heartbeat is the time a loop last went round, for a liveness check.
type Heartbeat struct {
	last atomic.Int64 // unix nanoseconds; 0: never
	// Now is for tests (default time.Now).
	Now func() time.Time
}

func (h *Heartbeat) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// Beat records that the loop went round now.
func (h *Heartbeat) Beat() { h.last.Store(h.now().UnixNano()) }

// Fresh returns nil when the loop went round within maxAge, else why not.
func (h *Heartbeat) Fresh(maxAge time.Duration) error {
	last := h.last.Load()
	if last == 0 {
		return errors.New("the loop has not run yet")
	}
	if age := h.now().Sub(time.Unix(0, last)); age > maxAge {
		return fmt.Errorf("the loop last ran %s ago (limit %s): it is stuck", age.Round(time.Second), maxAge)
	}
	return nil
}

// Mux routes /metrics (when metrics is not nil), /healthz (live) and
// /readyz (ready).
func Mux(metrics http.Handler, live, ready Checks) *http.ServeMux {
	mux := http.NewServeMux()
	if metrics != nil {
		mux.Handle("/metrics", metrics)
	}
	mux.Handle("/healthz", live)
	mux.Handle("/readyz", ready)
	return mux
}

// Server is the HTTP endpoint of --metrics-addr.
type Server struct {
	srv *http.Server
	lis net.Listener
}

// Serve listens on addr (host:port; port 0 picks one) and serves h in the
// background until Close. Slow clients are bounded: they cannot hold
// connections open by trickling headers.
func Serve(log *slog.Logger, addr string, h http.Handler) (*Server, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w; fix: choose a free host:port, or an empty address to turn the endpoint off", addr, err)
	}
	s := &Server{lis: lis, srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10}}
	go func() {
		if err := s.srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics and health endpoint stopped", "addr", lis.Addr().String(), "err", err)
		}
	}()
	log.Info("serving metrics and health", "addr", lis.Addr().String(), "paths", "/metrics /healthz /readyz")
	return s, nil
}

// Addr is the address it listens on (the port chosen for port 0).
func (s *Server) Addr() string { return s.lis.Addr().String() }

// Close stops serving.
func (s *Server) Close() error { return s.srv.Close() }
