// What the daemon's admission control reads of a request before the call
// runs, and its answer when it refuses one, for either socket.

package daemonclient

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
)

// Peek is what the daemon's limit on calls in flight needs of a request of
// either socket (a shim's Request or a plugin's PluginRequest): its CNI
// verb, its container and the wait its client allows.
type Peek struct {
	Command     string // CNI_COMMAND: ADD, DEL, CHECK, GC, STATUS, VERSION
	ContainerID string // "" for GC and STATUS
	TimeoutMs   int64  // the client's wait from sending (0: none given)
}

// PeekRequest reads body as either socket's request. ok is false when
// body is no call at all (empty: a readiness probe; or not a JSON object):
// the handler answers it without running anything.
func PeekRequest(body []byte) (p Peek, ok bool) {
	var r struct {
		Command     string   `json:"command"`
		ContainerID string   `json:"containerID"`
		Plugin      string   `json:"plugin"`
		Env         []string `json:"env"`
		TimeoutMs   int64    `json:"timeoutMs"`
	}
	if len(body) == 0 || json.Unmarshal(body, &r) != nil {
		return Peek{}, false
	}
	p = Peek{Command: r.Command, ContainerID: r.ContainerID, TimeoutMs: r.TimeoutMs}
	if r.Plugin != "" || r.Env != nil { // a plugin's call: its environment says
		p.Command, p.ContainerID = Getenv(r.Env, "CNI_COMMAND"), Getenv(r.Env, "CNI_CONTAINERID")
	}
	return p, true
}

// WithTimeoutMs is body (either socket's request) with its timeoutMs set
// to ms: a call that waited for a slot gets the wait its client has left,
// so the daemon's deadline stays the client's.
func WithTimeoutMs(body []byte, ms int64) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("rewrite timeoutMs: %w", err)
	}
	for k := range m { // keys match case-insensitively, as the decoder does
		if strings.EqualFold(k, "timeoutMs") {
			delete(m, k)
		}
	}
	v, err := json.Marshal(ms)
	if err != nil {
		return nil, err
	}
	m["timeoutMs"] = v
	return json.Marshal(m)
}

// ErrorResponse is an answer to either socket's request that carries only
// the CNI error e: both Response and PluginResponse read it as their Error.
func ErrorResponse(e *types.Error) []byte {
	b, err := json.Marshal(struct {
		Error *types.Error `json:"error"`
	}{e})
	if err != nil { // a types.Error always encodes
		return []byte(`{"error":{"code":999,"msg":"rdmanet daemon: encode error answer"}}`)
	}
	return b
}
