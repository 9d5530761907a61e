// The thin plugins' client of the daemon's plugin socket: forward the call,
// or run the -direct binary.

package daemonclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"time"

	"github.com/containernetworking/cni/pkg/types"
)

// DefaultSocket is where rdmanet-daemon serves plugin calls
// (rdmanet-daemon --plugin-socket); the DaemonSet mounts /run/rdmanet from
// the host, so plugins exec'd by the runtime on the host find it.
const DefaultSocket = "/run/rdmanet/plugins.sock"

// EnvSocket overrides DefaultSocket; "off" turns forwarding off (every call
// runs in the plugin's own process).
const EnvSocket = "RDMANET_PLUGIN_SOCKET"

// Limits of one forwarded call. The daemon gets the wait less a margin as
// its deadline, so it answers (with its error) before the plugin stops
// waiting.
var (
	DialTimeout = 500 * time.Millisecond
	AddTimeout  = 2 * time.Minute // ADD and CHECK: kubelet's runtime-request-timeout
	DelTimeout  = time.Minute
)

// Socket returns the plugin socket to try, "" when forwarding is off.
func Socket(getenv func(string) string) string {
	switch v := getenv(EnvSocket); v {
	case "":
		return DefaultSocket
	case "off":
		return ""
	default:
		return v
	}
}

// Outcome says who answers the call.
type Outcome int

const (
	// Local: nothing was done by a daemon (none listening, or it declined,
	// or a DEL/CHECK whose answer was lost): run the call in this process.
	Local Outcome = iota
	// Answered: the daemon ran the call; Result carries its answer.
	Answered
)

// Result is what Call found.
type Result struct {
	Outcome Outcome
	// Reason says why the call runs locally (for logs and tests).
	Reason string
	// Stdout is what the plugin prints on success; Err the CNI error.
	Stdout []byte
	Err    *types.Error
}

// Forwarded reports whether cmd is handed to the daemon at all: the verbs
// that do work. VERSION, GC and STATUS are answered by the binary itself.
func Forwarded(cmd string) bool { return cmd == "ADD" || cmd == "DEL" || cmd == "CHECK" }

// Call hands one call of plugin to the daemon at socket. build is the
// plugin's Go build info (debug.BuildInfo.String()). A call the daemon
// took but did not answer (it died or was stopped mid-call) is Local for
// DEL and CHECK, which are safe to repeat, and an ErrTryAgainLater error for
// ADD: a half-done ADD is not repeated in another process; the runtime
// tears the sandbox down (DEL) and retries.
func Call(socket, plugin, cmd string, stdin []byte, environ []string, build string) Result {
	if !Forwarded(cmd) {
		return Result{Reason: "CNI_COMMAND " + cmd + " is not forwarded"}
	}
	st, err := os.Lstat(socket)
	if err != nil {
		return Result{Reason: "no daemon: " + err.Error()}
	}
	if st.Mode().Type() != os.ModeSocket {
		return Result{Reason: fmt.Sprintf("no daemon: %s is not a socket", socket)}
	}
	wait := AddTimeout
	if cmd == "DEL" {
		wait = DelTimeout
	}
	req := PluginRequest{Version: PluginVersion, Plugin: plugin, Build: build, Env: environ, Stdin: stdin, TimeoutMs: wait.Milliseconds()}
	if n := len(stdin); n > MaxMessage {
		return Result{Reason: fmt.Sprintf("config of %d bytes is larger than the daemon takes (%d)", n, MaxMessage)}
	}
	var resp PluginResponse
	err = Exchange(socket, DialTimeout, wait, req, &resp)
	switch {
	case errors.Is(err, ErrNotSent):
		// nothing was sent: running the call here cannot run it twice
		return Result{Reason: "no daemon: " + err.Error()}
	case err != nil && cmd == "ADD":
		return Result{Outcome: Answered, Err: types.NewError(types.ErrTryAgainLater,
			fmt.Sprintf("%s: the rdmanet daemon at %s took ADD of container %s and gave no answer (%v); the runtime retries the sandbox", plugin, socket, Getenv(environ, "CNI_CONTAINERID"), err), "")}
	case err != nil:
		return Result{Reason: fmt.Sprintf("daemon gave no answer to %s (%v): repeating it here", cmd, err)}
	case resp.Declined != "":
		return Result{Reason: "daemon declined: " + resp.Declined}
	case resp.Error != nil:
		return Result{Outcome: Answered, Err: resp.Error}
	}
	return Result{Outcome: Answered, Stdout: resp.Stdout}
}

// Getenv is the value of key in environ, the last one winning (as exec
// does); "" when unset.
func Getenv(environ []string, key string) string {
	v := ""
	for _, kv := range environ {
		if len(kv) > len(key) && kv[len(key)] == '=' && kv[:len(key)] == key {
			v = kv[len(key)+1:]
		}
	}
	return v
}

// Main runs one exec of the thin plugin binary plugin: it forwards the
// call when a daemon answers and exits with the daemon's answer; otherwise
// it replaces this process with direct (the plugin doing the whole call,
// installed next to it: Exec), which reads the runtime's stdin as written.
func Main(plugin, direct string) {
	cmd := os.Getenv("CNI_COMMAND")
	socket := Socket(os.Getenv)
	if !Forwarded(cmd) || socket == "" {
		Direct(plugin, direct, nil)
		return
	}
	if _, err := os.Lstat(socket); err != nil {
		Direct(plugin, direct, nil) // no daemon on this node: leave stdin untouched
		return
	}
	stdin, err := io.ReadAll(io.LimitReader(os.Stdin, MaxMessage+1))
	if err != nil || len(stdin) > MaxMessage {
		// let the direct plugin read and report it as it always has
		if rerr := setStdin(io.MultiReader(bytes.NewReader(stdin), os.Stdin)); rerr != nil {
			fail(plugin, rerr)
		}
		Direct(plugin, direct, nil)
		return
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		Direct(plugin, direct, stdin)
		return
	}
	r := Call(socket, plugin, cmd, stdin, Environ(os.Environ(), os.Hostname), bi.String())
	if r.Outcome == Local {
		Direct(plugin, direct, stdin)
		return
	}
	os.Exit(Print(r, os.Stdout))
}

// runDirect replaces this process with the direct binary, with this
// process's arguments and environment, and stdin when not nil (else the
// process's own). It returns only to fail: the error is printed as the
// plugin's CNI error and the process exits 1.
func Direct(plugin, direct string, stdin []byte) {
	bin, err := Find(direct, os.Getenv("CNI_PATH"))
	if err == nil {
		err = Exec(bin, os.Args[1:], stdin)
	}
	// not "no daemon answered": VERSION, GC and STATUS never ask one
	fail(plugin, fmt.Errorf("%s runs this call here, and %w", direct, err))
}

// Environ is the environment sent with a call: the process's, with
// NODENAME set to the host name when it is unset — the name rdmanet-ipam
// would take from the host name (node_name and NODENAME win over it, as
// in the plugin), so the daemon allocates for the plugin's node.
func Environ(environ []string, hostname func() (string, error)) []string {
	if Getenv(environ, "NODENAME") != "" {
		return environ
	}
	h, err := hostname()
	if err != nil || h == "" {
		return environ
	}
	return append(environ[:len(environ):len(environ)], "NODENAME="+h)
}

// Print writes an answered call as the plugin binary would (the result, or
// the CNI error JSON on stdout) and returns the exit code.
func Print(r Result, stdout io.Writer) int {
	if r.Err != nil {
		b, err := json.Marshal(r.Err)
		if err != nil {
			return 1
		}
		_, _ = stdout.Write(append(b, '\n'))
		return 1
	}
	if _, err := stdout.Write(r.Stdout); err != nil {
		return 1
	}
	return 0
}

func fail(plugin string, err error) {
	e := types.NewError(types.ErrInternal, plugin+": "+err.Error(), "")
	_ = e.Print()
	os.Exit(1)
}
