package fleetbench

import (
	"context"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// Verbs as the API server's apiserver_request_total names them, POST and
// PUT spelled as the request's meaning (CREATE, UPDATE).
const (
	VerbGet              = "GET"
	VerbList             = "LIST"
	VerbWatch            = "WATCH"
	VerbCreate           = "CREATE"
	VerbUpdate           = "UPDATE"
	VerbPatch            = "PATCH"
	VerbApply            = "APPLY"
	VerbDelete           = "DELETE"
	VerbDeleteCollection = "DELETECOLLECTION"
)

// IsWrite reports whether verb changes an object.
func IsWrite(verb string) bool {
	switch verb {
	case VerbCreate, VerbUpdate, VerbPatch, VerbApply, VerbDelete, VerbDeleteCollection:
		return true
	}
	return false
}

// Classify returns the API verb and "resource[/subresource]" of a request
// to the API server, the way the server's request metrics label it; ok is
// false for a path that names no resource (discovery, /metrics, /healthz).
func Classify(method, path, rawQuery, contentType string) (verb, resource string, ok bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return "", "", false
	}
	watchPath := false
	if len(parts) > 0 && parts[0] == "watch" { // the deprecated /watch/ prefix
		watchPath, parts = true, parts[1:]
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:] // a namespaced resource; "namespaces/x" alone is the Namespace
	}
	if len(parts) == 0 || parts[0] == "" {
		return "", "", false
	}
	resource = parts[0]
	named := len(parts) >= 2
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	watch := watchPath || strings.Contains("&"+rawQuery+"&", "&watch=true&") || strings.Contains("&"+rawQuery+"&", "&watch=1&")
	switch method {
	case http.MethodGet:
		switch {
		case watch:
			verb = VerbWatch
		case named:
			verb = VerbGet
		default:
			verb = VerbList
		}
	case http.MethodPost:
		verb = VerbCreate
	case http.MethodPut:
		verb = VerbUpdate
	case http.MethodPatch:
		verb = VerbPatch
		if strings.HasPrefix(contentType, "application/apply-patch") {
			verb = VerbApply
		}
	case http.MethodDelete:
		verb = VerbDelete
		if !named {
			verb = VerbDeleteCollection
		}
	default:
		verb = method
	}
	return verb, resource, true
}

type tagKey struct{}

// WithTag returns ctx whose requests a Counter counts under tag (e.g. the
// kind of pod whose start made them).
func WithTag(ctx context.Context, tag string) context.Context {
	return context.WithValue(ctx, tagKey{}, tag)
}

func tagOf(ctx context.Context) string {
	s, _ := ctx.Value(tagKey{}).(string)
	return s
}

// Key is one counted kind of request.
type Key struct {
	Tag      string // WithTag's tag, "" without one
	Verb     string
	Resource string
}

// Counts are a Counter's totals.
type Counts struct {
	Requests map[Key]int64
	// BytesIn: response bytes read (watch streams included); BytesOut:
	// request bodies sent.
	BytesIn, BytesOut int64
	// Errors are requests answered 429 or 5xx, or not answered.
	Errors int64
	// Failed are the requests answered with a status of 400 or more (409
	// conflicts, 403 refusals, ...), or not answered (Code 0), by verb,
	// resource and status: a write the server refused is in Requests too,
	// and here it tells a retry from a second change.
	Failed map[FailKey]int64
}

// FailKey is one counted kind of failed request.
type FailKey struct {
	Verb, Resource string
	Code           int // HTTP status; 0: no answer
}

// Sub returns c - old.
func (c Counts) Sub(old Counts) Counts {
	out := Counts{Requests: map[Key]int64{}, BytesIn: c.BytesIn - old.BytesIn, BytesOut: c.BytesOut - old.BytesOut, Errors: c.Errors - old.Errors, Failed: map[FailKey]int64{}}
	for k, v := range c.Requests {
		if d := v - old.Requests[k]; d != 0 {
			out.Requests[k] = d
		}
	}
	for k, v := range c.Failed {
		if d := v - old.Failed[k]; d != 0 {
			out.Failed[k] = d
		}
	}
	return out
}

// Add adds o to c (c.Requests must be non-nil).
func (c *Counts) Add(o Counts) {
	for k, v := range o.Requests {
		c.Requests[k] += v
	}
	if len(o.Failed) > 0 && c.Failed == nil {
		c.Failed = map[FailKey]int64{}
	}
	for k, v := range o.Failed {
		c.Failed[k] += v
	}
	c.BytesIn += o.BytesIn
	c.BytesOut += o.BytesOut
	c.Errors += o.Errors
}

// Sum counts the requests that match.
func (c Counts) Sum(match func(Key) bool) int64 {
	var n int64
	for k, v := range c.Requests {
		if match(k) {
			n += v
		}
	}
	return n
}

// Writes is the number of write requests (IsWrite).
func (c Counts) Writes() int64 { return c.Sum(func(k Key) bool { return IsWrite(k.Verb) }) }

// Counter counts one client's requests to the API server, by tag, verb and
// resource, and the bytes both ways; Wrap puts it into a transport.
type Counter struct {
	mu      sync.Mutex
	req     map[Key]int64
	failed  map[FailKey]int64
	in, out atomic.Int64
	errs    atomic.Int64
	watches atomic.Int64
}

// NewCounter returns an empty counter.
func NewCounter() *Counter { return &Counter{req: map[Key]int64{}, failed: map[FailKey]int64{}} }

// Wrap is a rest.Config WrapTransport.
func (c *Counter) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper{c: c, next: rt}
}

// Snapshot returns the counts so far.
func (c *Counter) Snapshot() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Counts{Requests: maps.Clone(c.req), Failed: maps.Clone(c.failed), BytesIn: c.in.Load(), BytesOut: c.out.Load(), Errors: c.errs.Load()}
}

// WatchesOpen is the number of watch streams open now.
func (c *Counter) WatchesOpen() int64 { return c.watches.Load() }

type roundTripper struct {
	c    *Counter
	next http.RoundTripper
}

func (r roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	verb, res, ok := Classify(req.Method, req.URL.Path, req.URL.RawQuery, req.Header.Get("Content-Type"))
	if ok {
		r.c.mu.Lock()
		r.c.req[Key{Tag: tagOf(req.Context()), Verb: verb, Resource: res}]++
		r.c.mu.Unlock()
	}
	if req.ContentLength > 0 {
		r.c.out.Add(req.ContentLength)
	}
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		r.c.errs.Add(1)
		r.c.fail(ok, verb, res, 0)
		return resp, err
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
		r.c.errs.Add(1)
	}
	if resp.StatusCode >= 400 {
		r.c.fail(ok, verb, res, resp.StatusCode)
	}
	body := &countingBody{ReadCloser: resp.Body, c: r.c}
	if verb == VerbWatch && resp.StatusCode == http.StatusOK {
		body.watch = true
		r.c.watches.Add(1)
	}
	resp.Body = body
	return resp, nil
}

func (c *Counter) fail(ok bool, verb, res string, code int) {
	if !ok {
		return
	}
	c.mu.Lock()
	c.failed[FailKey{Verb: verb, Resource: res, Code: code}]++
	c.mu.Unlock()
}

type countingBody struct {
	io.ReadCloser
	c      *Counter
	watch  bool
	closed atomic.Bool
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.c.in.Add(int64(n))
	return n, err
}

func (b *countingBody) Close() error {
	if b.watch && b.closed.CompareAndSwap(false, true) {
		b.c.watches.Add(-1)
	}
	return b.ReadCloser.Close()
}
