// Package telemetry is what rdmanet's long-running processes (rdmanet-agent,
// rdmanet-daemon) share for operators: the logger (text or JSON), the
// fields of a CNI call's log records, and the HTTP endpoint serving
// /metrics, /healthz and /readyz. It uses the standard library only, so
// packages on the CNI path (internal/cni/meta) may import it; the
// Prometheus client stays in the daemon's and agent's metrics packages.
package telemetry

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Log formats.
const (
	LogText = "text"
	LogJSON = "json"
)

// NewLogger builds the logger of --log-format and --log-level: records go
// to w as logfmt-style text or as one JSON object per line. Errors name
// the flag, the bad value and the accepted ones.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level=%q: must be debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case LogText:
		return slog.New(&dedup{Handler: slog.NewTextHandler(w, opts)}), nil
	case LogJSON:
		return slog.New(&dedup{Handler: slog.NewJSONHandler(w, opts)}), nil
	}
	return nil, fmt.Errorf("--log-format=%q: must be %s or %s", format, LogText, LogJSON)
}

// CNICallAttrs are the fields every log record of one CNI call carries:
// "container" (CNI_CONTAINERID) and, from CNI_ARGS, "pod_namespace" and
// "pod_name" (K8S_POD_NAMESPACE, K8S_POD_NAME; absent when the runtime
// passed none).
func CNICallAttrs(containerID, cniArgs string) []any {
	attrs := []any{"container", containerID}
	var ns, name string
	for _, kv := range strings.Split(cniArgs, ";") {
		switch k, v, _ := strings.Cut(kv, "="); k {
		case "K8S_POD_NAMESPACE":
			ns = v
		case "K8S_POD_NAME":
			name = v
		}
	}
	if ns != "" {
		attrs = append(attrs, "pod_namespace", ns)
	}
	if name != "" {
		attrs = append(attrs, "pod_name", name)
	}
	return attrs
}

// dedup is a handler that drops a record's attribute when a With on the
// logger already carries the same key with the same value (a CNI call's
// logger carries "container", and many records name it again): JSON
// objects then hold each key once.
type dedup struct {
	slog.Handler
	with map[string]slog.Value
}

func (h *dedup) WithAttrs(attrs []slog.Attr) slog.Handler {
	with := make(map[string]slog.Value, len(h.with)+len(attrs))
	for k, v := range h.with {
		with[k] = v
	}
	for _, a := range attrs {
		with[a.Key] = a.Value.Resolve()
	}
	return &dedup{Handler: h.Handler.WithAttrs(attrs), with: with}
}

func (h *dedup) WithGroup(name string) slog.Handler {
	return h.Handler.WithGroup(name) // keys in a group are not the With keys: stop deduplicating
}

func (h *dedup) Handle(ctx context.Context, r slog.Record) error {
	if len(h.with) == 0 {
		return h.Handler.Handle(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if v, ok := h.with[a.Key]; !ok || !v.Equal(a.Value.Resolve()) {
			out.AddAttrs(a)
		}
		return true
	})
	return h.Handler.Handle(ctx, out)
}
