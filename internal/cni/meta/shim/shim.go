// Package shim is the rdmanet CNI binary's entry point. It is deliberately
// small (no Kubernetes client code) so it starts fast: it hands the call to
// the rdmanet daemon over its unix socket, and when no daemon is configured
// or none answers, runs the per-call plugin (rdmanet-direct, installed next
// to it), which does the whole job itself within bounded time.
package shim

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/rdmanet/rdmanet/internal/daemonclient"
)

// DirectBinary is the per-call plugin the shim falls back to.
const DirectBinary = "rdmanet-direct"

// Limits of one call to the daemon. A call's budget is the config's
// addTimeout (ADD, CHECK, STATUS) or delTimeout (DEL, GC), defaults as in
// the meta package; the shim sends it with the request as the daemon's
// deadline and waits that long plus AnswerGrace (for ADD also delTimeout: a
// timed-out ADD still rolls back before it answers).
var (
	DialTimeout       = 500 * time.Millisecond
	DefaultAddTimeout = 2 * time.Minute
	DefaultDelTimeout = 30 * time.Second
	AnswerGrace       = 5 * time.Second
)

var versions = version.PluginSupports("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")

// Main runs the shim.
func Main() {
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add:    func(a *skel.CmdArgs) error { return call("ADD", a) },
		Del:    func(a *skel.CmdArgs) error { return call("DEL", a) },
		Check:  func(a *skel.CmdArgs) error { return call("CHECK", a) },
		Status: func(a *skel.CmdArgs) error { return call("STATUS", a) },
		GC:     func(a *skel.CmdArgs) error { return call("GC", a) },
	}, versions, "rdmanet meta CNI shim (hands calls to the rdmanet daemon; falls back to rdmanet-direct)")
}

// errNoDaemon means the daemon is not there: nothing was sent, falling back is safe.
var errNoDaemon = errors.New("daemon not reachable")

func call(cmd string, a *skel.CmdArgs) error {
	var conf daemonclient.Conf
	if err := json.Unmarshal(a.StdinData, &conf); err != nil {
		if cmd == "DEL" || cmd == "GC" {
			// rdmanet-direct's DEL works from its cache whatever the config
			return direct(cmd, a, conf)
		}
		return types.NewError(types.ErrDecodingFailure, "rdmanet: network config is not valid JSON: "+err.Error(), "")
	}
	if conf.DaemonSocket != "" {
		out, err := viaDaemon(cmd, a, conf)
		switch {
		case err == nil:
			if cmd == "ADD" {
				_, werr := os.Stdout.Write(append(out, '\n'))
				return werr
			}
			return nil
		case !errors.Is(err, errNoDaemon):
			return err
		}
		// fall through: the daemon is down, do the work per call
	}
	return direct(cmd, a, conf)
}

// budget is how long the daemon may take for cmd, per the config.
func budget(cmd string, conf daemonclient.Conf) time.Duration {
	parse := func(v string, def time.Duration) time.Duration {
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			return d
		}
		return def
	}
	if cmd == "DEL" || cmd == "GC" {
		return parse(conf.DelTimeout, DefaultDelTimeout)
	}
	return parse(conf.AddTimeout, DefaultAddTimeout)
}

func viaDaemon(cmd string, a *skel.CmdArgs, conf daemonclient.Conf) (json.RawMessage, error) {
	socket := conf.DaemonSocket
	if _, err := os.Stat(socket); err != nil {
		return nil, fmt.Errorf("%w: %v", errNoDaemon, err)
	}
	limit := budget(cmd, conf)
	wait := limit + AnswerGrace
	if cmd == "ADD" {
		wait += budget("DEL", conf) // a timed-out ADD rolls back before it answers
	}
	var r daemonclient.Response
	err := daemonclient.Exchange(socket, DialTimeout, wait, daemonclient.Request{Version: daemonclient.Version, Command: cmd, ContainerID: a.ContainerID, Netns: a.Netns,
		IfName: a.IfName, Args: a.Args, Path: a.Path, Config: a.StdinData, TimeoutMs: limit.Milliseconds()}, &r)
	switch {
	case errors.Is(err, daemonclient.ErrNotSent):
		// nothing was sent: running the call per process cannot run it twice
		return nil, fmt.Errorf("%w: %v", errNoDaemon, err)
	case err != nil:
		return nil, tryAgain(socket, cmd, a, err)
	case r.Error != nil:
		return nil, r.Error
	}
	return r.Result, nil
}

// tryAgain is the answer when the daemon took the call but gave no answer:
// the call may have run, so it is not repeated per process; the runtime
// retries (ADD) or the pod's DEL runs again.
func tryAgain(socket, cmd string, a *skel.CmdArgs, err error) error {
	return types.NewError(types.ErrTryAgainLater, fmt.Sprintf("rdmanet daemon at %s did not answer %s for container %s: %v", socket, cmd, a.ContainerID, err), "")
}

// direct becomes rdmanet-direct (exec) with the same environment and
// config, so the runtime gets its output and exit status. Without rdmanet-direct, a DEL
// or GC with nothing to clean up (no cache of the container) succeeds.
func direct(cmd string, a *skel.CmdArgs, conf daemonclient.Conf) error {
	bin, err := daemonclient.Find(DirectBinary, a.Path)
	if err != nil {
		err = fmt.Errorf("rdmanet: no daemon configured or reachable, and %w, or start the rdmanet daemon", err)
		if (cmd == "DEL" && nothingCached(conf, a.ContainerID)) || cmd == "GC" {
			fmt.Fprintf(os.Stderr, "%v; %s succeeds: nothing of container %q is cached\n", err, cmd, a.ContainerID)
			return nil
		}
		return types.NewError(types.ErrInternal, err.Error(), "")
	}
	// replaces this process; returns only when rdmanet-direct cannot start
	err = daemonclient.Exec(bin, nil, a.StdinData)
	return types.NewError(types.ErrInternal, err.Error(), "")
}

// DefaultCNIDir is the meta plugin's default cache dir (meta.DefaultCNIDir;
// the shim does not link the meta package).
const DefaultCNIDir = "/var/lib/cni/rdmanet"

// nothingCached reports whether neither the meta plugin's cache nor
// libcni's (under cniDir) has anything of the container.
func nothingCached(conf daemonclient.Conf, containerID string) bool {
	dir := conf.CNIDir
	if dir == "" {
		dir = DefaultCNIDir
	}
	if _, err := os.Stat(filepath.Join(dir, "cache", containerID+".json")); !errors.Is(err, os.ErrNotExist) {
		return false
	}
	m, err := filepath.Glob(filepath.Join(dir, "libcni", "results", "*-"+containerID+"-*"))
	return err == nil && len(m) == 0
}
