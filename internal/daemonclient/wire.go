// The protocol between the thin clients and the daemon: one connection per
// call over a unix socket.

package daemonclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/containernetworking/cni/pkg/types"
)

// Version is the protocol version. A daemon refuses a request of another
// version with an error that names both, so a half-upgraded node fails
// clearly instead of misreading a call.
const Version = 1

// MaxMessage bounds a request or a response (a CNI config with its
// delegates, or a result, is a few KiB).
const MaxMessage = 4 << 20

// Request carries one CNI invocation as the runtime made it.
type Request struct {
	Version     int             `json:"v"`
	Command     string          `json:"command"` // ADD, DEL, CHECK, STATUS
	ContainerID string          `json:"containerID"`
	Netns       string          `json:"netns"`
	IfName      string          `json:"ifName"`
	Args        string          `json:"args"`
	Path        string          `json:"path"`
	Config      json.RawMessage `json:"config"`
	// TimeoutMs is how long the shim waits for the answer, from when it
	// sent the request: the daemon's deadline for the call (delegate
	// processes still running then are killed). 0: the daemon's default.
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
}

// Response is the plugin's answer: a result (ADD) or a CNI error.
type Response struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *types.Error    `json:"error,omitempty"`
}

// Conf is the part of the network config the shim reads.
type Conf struct {
	CNIVersion   string `json:"cniVersion"`
	DaemonSocket string `json:"daemonSocket"`
	// AddTimeout and DelTimeout bound the call (Go durations; defaults in
	// the meta package: 2m and 30s).
	AddTimeout string `json:"addTimeout"`
	DelTimeout string `json:"delTimeout"`
	// CNIDir is the meta plugin's cache dir, where the shim looks for
	// anything to delete when neither the daemon nor rdmanet-direct is there.
	CNIDir string `json:"cniDir"`
}

// ErrTooLarge means a message exceeded MaxMessage.
var ErrTooLarge = errors.New("message larger than MaxMessage")

// Read decodes one message from r, which must end (EOF) after it.
func Read(r io.Reader, v any) error {
	b, err := io.ReadAll(io.LimitReader(r, MaxMessage+1))
	if err != nil {
		return err
	}
	if len(b) > MaxMessage {
		return ErrTooLarge
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %d bytes: %w", len(b), err)
	}
	return nil
}

// PluginVersion is the version of the plugin protocol: an exec'd rdmanet
// delegate plugin (sriov, rdma, rdmanet-ipam, also as whereabouts) handing
// its call to the daemon's plugin socket. A daemon refuses (declines) a
// request of another version, and the plugin then does the work itself.
const PluginVersion = 1

// PluginRequest is one exec'd plugin call, as the runtime or meta plugin
// made it: the plugin's whole environment (CNI_* and what the plugin reads
// besides, e.g. NODENAME) and its stdin. Build is the plugin binary's Go
// build info (runtime/debug.BuildInfo.String()): the daemon runs the call
// in-process only when that is its own build, so the answer is exactly what
// the binary would have given.
type PluginRequest struct {
	Version   int      `json:"v"`
	Plugin    string   `json:"plugin"` // sriov, rdma, rdmanet-ipam, whereabouts
	Build     string   `json:"build"`
	Env       []string `json:"env"`
	Stdin     []byte   `json:"stdin"`
	TimeoutMs int64    `json:"timeoutMs,omitempty"`
}

// PluginResponse is the daemon's answer. Declined (with the reason) means
// the daemon did nothing: the plugin must run the call itself. Otherwise
// Error is the CNI error, or Stdout what the binary prints on success.
type PluginResponse struct {
	Declined string       `json:"declined,omitempty"`
	Stdout   []byte       `json:"stdout,omitempty"`
	Error    *types.Error `json:"error,omitempty"`
}
