// Package kubeclient bounds the API requests of rdmanet's node-side
// clients: every request that is not long-running (a watch, a followed
// log, an upgraded connection) ends within a timeout, so a hung API server
// or a connection that went dark fails the request instead of blocking its
// caller for good.
//
// rest.Config.Timeout cannot do this: client-go makes it the http.Client's
// Timeout, which covers reading the answer, and adds it as the timeout
// parameter of every request, watches included, so every informer's watch
// would be cut at that timeout and re-established. BoundRequests leaves
// watches alone: they end at their own timeoutSeconds (client-go's
// reflector sets 5–10 min) or when their caller's context ends.
package kubeclient

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// DefaultRequestTimeout bounds one API request of a node-side client. A
// healthy request takes milliseconds; upstream's scalability SLOs allow 1 s
// (p99) for a single object and 30 s for the largest LIST (a LIST is paged
// in 500s by informers, and rdmanet's node clients list only their node's
// objects), and the API server ends its own non-long-running requests at
// 60 s. Past 30 s the request is given up and its caller retries.
const DefaultRequestTimeout = 30 * time.Second

// BoundRequests makes every request of the clients built from cfg that is
// not long-running (LongRunning) end within d, from sending it to the end
// of reading its answer (the client's rate-limiter wait is before it and
// not counted). A request past it fails with an error that wraps
// context.DeadlineExceeded and names the bound. d <= 0 does nothing.
func BoundRequests(cfg *rest.Config, d time.Duration) {
	if d <= 0 {
		return
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &bounded{rt: rt, d: d} })
}

// LongRunning reports whether req is a request that stays open by design:
// a watch (the watch parameter, or a legacy /watch/ path), a followed log,
// or a connection upgrade (exec, attach, port-forward).
func LongRunning(req *http.Request) bool {
	q := req.URL.Query()
	switch {
	case isTrue(q.Get("watch")), isTrue(q.Get("follow")):
		return true
	case strings.Contains(req.URL.Path, "/watch/"):
		return true
	case req.Header.Get("Upgrade") != "":
		return true
	}
	return false
}

func isTrue(v string) bool { return v == "true" || v == "1" }

// bounded is the round tripper of BoundRequests.
type bounded struct {
	rt http.RoundTripper
	d  time.Duration
}

func (b *bounded) RoundTrip(req *http.Request) (*http.Response, error) {
	if LongRunning(req) {
		return b.rt.RoundTrip(req)
	}
	ctx, cancel := context.WithTimeout(req.Context(), b.d)
	resp, err := b.rt.RoundTrip(req.WithContext(ctx))
	if err != nil {
		defer cancel()
		return nil, b.wrap(ctx, req, err)
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel, b: b, ctx: ctx, req: req}
	return resp, nil
}

// wrap names the bound in an error that it caused (the caller's own
// context still running).
func (b *bounded) wrap(ctx context.Context, req *http.Request, err error) error {
	if ctx.Err() == context.DeadlineExceeded && req.Context().Err() == nil {
		return fmt.Errorf("%s %s: no answer within %v (the client's request timeout): %w", req.Method, req.URL.Path, b.d, err)
	}
	return err
}

// WrappedRoundTripper lets client-go's transport utilities see through it.
func (b *bounded) WrappedRoundTripper() http.RoundTripper { return b.rt }

// cancelBody ends the request's bound when its answer has been read.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
	b      *bounded
	ctx    context.Context
	req    *http.Request
}

func (c *cancelBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = c.b.wrap(c.ctx, c.req, err)
	}
	return n, err
}

func (c *cancelBody) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}
