package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Control talks to a running node supervisor over its control socket.
type Control struct {
	sock string
	c    *http.Client
}

// NewControl talks to the first node's supervisor (the control plane's).
func NewControl(l Layout) *Control { return newControl(l.ControlSocket()) }

// NewNodeControl talks to node n's supervisor.
func NewNodeControl(l Layout, n Node) *Control { return newControl(l.NodeControlSocket(n)) }

func newControl(sock string) *Control {
	return &Control{sock: sock, c: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}}
}

func (c *Control) do(ctx context.Context, method, path string, q url.Values, body io.Reader) ([]byte, error) {
	u := "http://supervisor" + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	resp, err := c.c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("supervisor %s: %w", c.sock, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return b, fmt.Errorf("supervisor %s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	return b, nil
}

// Status returns the supervisor's view, or an error when it does not answer.
func (c *Control) Status(ctx context.Context) (Status, error) {
	var st Status
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	b, err := c.do(ctx, http.MethodGet, "/status", nil, nil)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("supervisor status: %w", err)
	}
	return st, nil
}

// Restart stops a component (SIGTERM, then SIGKILL after 20 s) and starts it
// again, returning once it is healthy.
func (c *Control) Restart(ctx context.Context, name string) error {
	_, err := c.do(ctx, http.MethodPost, "/restart", url.Values{"name": {name}}, nil)
	return err
}

// Stop stops a component (SIGTERM, then SIGKILL after 20 s) and leaves it
// stopped: its node's pods keep running under containerd, as when a
// machine's kubelet is down.
func (c *Control) Stop(ctx context.Context, name string) error {
	_, err := c.do(ctx, http.MethodPost, "/stop", url.Values{"name": {name}}, nil)
	return err
}

// Start starts a stopped component, returning once it is healthy.
func (c *Control) Start(ctx context.Context, name string) error {
	_, err := c.do(ctx, http.MethodPost, "/start", url.Values{"name": {name}}, nil)
	return err
}

// Import imports an image archive into containerd's k8s.io namespace.
func (c *Control) Import(ctx context.Context, archive string) (string, error) {
	b, err := c.do(ctx, http.MethodPost, "/import", url.Values{"path": {archive}}, nil)
	return string(b), err
}

// Exec runs a command in the node's namespaces (network and mount) and
// returns its combined output.
func (c *Control) Exec(ctx context.Context, argv ...string) (string, error) {
	body, _ := json.Marshal(map[string][]string{"argv": argv})
	b, err := c.do(ctx, http.MethodPost, "/exec", nil, strings.NewReader(string(body)))
	return string(b), err
}

// Shutdown asks the supervisor to stop every component and exit.
func (c *Control) Shutdown(ctx context.Context) error {
	_, err := c.do(ctx, http.MethodPost, "/shutdown", nil, nil)
	return err
}

// Crash kills every process of the node at once (SIGKILL, no ordered stop,
// no CNI DEL) and stops the supervisor: a machine losing power.
func (c *Control) Crash(ctx context.Context) error {
	_, err := c.do(ctx, http.MethodPost, "/shutdown", url.Values{"crash": {"1"}}, nil)
	return err
}
