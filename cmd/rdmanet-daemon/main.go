// Command rdmanet-daemon serves the rdmanet CNI shim on a unix socket with
// warm state: informer caches of the node's pods and every NAD, one kubelet
// PodResources connection, and the plugin logic of rdmanet-direct. The
// daemon is internal/daemon; this file parses its flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/rdmanet/rdmanet/internal/cni/meta"
	"github.com/rdmanet/rdmanet/internal/cni/meta/kube"
	"github.com/rdmanet/rdmanet/internal/daemon"
	"github.com/rdmanet/rdmanet/internal/daemon/sockserve"
	"github.com/rdmanet/rdmanet/internal/daemonclient"
	"github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/internal/telemetry"
	"github.com/rdmanet/rdmanet/internal/version"
)

func main() {
	c, code := parseFlags(os.Args[1:])
	if code >= 0 {
		os.Exit(code)
	}
	os.Exit(daemon.Exit(daemon.Run(context.Background(), c), os.Stderr))
}

// parseFlags returns the daemon's config, or the exit status (>= 0) when
// the process ends here (-help, -version, a bad flag).
func parseFlags(args []string) (daemon.Config, int) {
	var c daemon.Config
	fs := flag.NewFlagSet("rdmanet-daemon", flag.ContinueOnError)
	version.Flag(fs, "rdmanet-daemon")
	fs.StringVar(&c.ConfPath, "config", "/etc/cni/net.d/00-rdmanet.conf", "the rdmanet network config (the same file the runtime passes to the shim): kubeconfig, source, podResourcesSocket, daemonSocket")
	fs.StringVar(&c.Socket, "socket", "", "unix socket to serve (default: the config's daemonSocket)")
	fs.StringVar(&c.NodeName, "node-name", os.Getenv("NODE_NAME"), "this node's name: the pod cache holds only its pods (default $NODE_NAME)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", telemetry.LogText, "text or json (logs go to stderr); a CNI call's records carry container, pod_namespace and pod_name")
	fs.DurationVar(&c.SyncTimeout, "sync-timeout", 60*time.Second, "how long to wait for the first informer sync")
	fs.StringVar(&c.StatusWrite, "status-write", "async", "when the network-status annotation is written: \"async\" (after ADD has answered the runtime; transient API errors retried for up to 2m, cancelled by the container's DEL) or \"sync\" (before ADD answers; a failed write fails the ADD)")
	fs.BoolVar(&c.Probe, "probe", false, "readiness check (no shell in the image): exit 0 when the daemon answers on its socket (--socket, else the daemonSocket of --config, which is read), else 1")
	fs.BoolVar(&c.InProcess, "in-process-plugins", true, "run rdmanet's own delegate plugins (sriov, rdma, rdmanet-ipam, also as whereabouts) inside the daemon instead of exec'ing them, when the file on the CNI path is the same rdmanet build as this daemon (same VCS revision or module version, per its Go build info); other plugins, other builds and unstamped builds always run as processes. --log-level=debug logs the decision per plugin file. false: every plugin runs as a process")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", "", "serve Prometheus /metrics (docs/metrics.md), /healthz (the serve loops run) and /readyz (the sockets answer, the informer caches are synced) over HTTP on this host:port, e.g. 127.0.0.1:9464. Empty (the default): off, since the daemon runs in the host network namespace and which address and port to open on a node is the operator's choice (deploy/ opens 9464 on the node's IP). Never on the CNI path: scrapes read counters and cached files only")
	fs.StringVar(&c.IPAMStateDir, "ipam-state-dir", ipam.DefaultLocalStorePath, "rdmanet-ipam's node-local state directory (its store path), whose block caches give the rdmanet_ipam_* usage metrics; empty: no IPAM metrics")
	fs.DurationVar(&c.RequestTimeout, "request-timeout", 0, "deadline of a call whose request carries none (a shim of an older release); 0: the config's addTimeout (ADD, CHECK, STATUS) or delTimeout (DEL). A shim of this release sends its own")
	fs.DurationVar(&c.RetryInterval, "del-retry-interval", daemon.DefaultRetryInterval, "how often to look for DELs that left delegates behind (the cache's pending records) and retry those due")
	fs.DurationVar(&c.RetryBackoff, "del-retry-backoff", meta.DefaultRetryBackoff, "first delay before a pending DEL is retried, doubled per attempt up to --del-retry-max-backoff")
	fs.DurationVar(&c.RetryMaxBackoff, "del-retry-max-backoff", meta.DefaultRetryMaxBackoff, "longest delay between retries of a pending DEL (it is retried until it succeeds)")
	fs.BoolVar(&c.PodEvents, "pod-events", true, "record a Warning Event (reason "+kube.EventReasonAttachFailed+", the CNI error's text and fix) on the pod of every failed ADD, so `kubectl describe pod` shows why its sandbox does not start; repeats are aggregated and rate-limited per pod (client-go's event correlator: 25 at once, then one per 5 minutes). Needs events create/patch (deploy/rbac-daemon.yaml); the kubernetes source only")
	fs.BoolVar(&c.Meta, "meta", true, "serve the rdmanet meta CNI shim on the config's daemonSocket (needs --config). false: serve only --plugin-socket, e.g. on a node where Multus stays the meta plugin and rdmanet's sriov, rdma and rdmanet-ipam are its delegates")
	fs.StringVar(&c.PluginSocket, "plugin-socket", daemonclient.DefaultSocket, "unix socket on which exec'd rdmanet plugins (sriov, rdma, rdmanet-ipam, also as whereabouts) hand their calls to this daemon, which runs them in-process with warm API clients when the plugin file is this daemon's build (else the plugin does the work itself, as when no daemon runs); the plugins look here unless RDMANET_PLUGIN_SOCKET says otherwise. Empty: off")
	fs.IntVar(&c.Calls.MaxInFlight, sockserve.FlagMaxInFlight, sockserve.DefaultMaxInFlight, "CNI calls the daemon runs at once over both sockets (the shim's and the plugins'; a delegate plugin's call under its container's call counts once): a call in flight costs the daemon about 70 KiB and 4 goroutines, and a burst beyond this attaches no faster on one node. Past it calls wait (--max-queued-calls, --max-queue-wait), then are refused with CNI error 11 (try again later: the runtime retries) naming this flag. 0: no limit")
	fs.IntVar(&c.Calls.DelReserve, sockserve.FlagDelReserve, sockserve.DefaultDelReserve, "of --max-inflight-calls, the slots only DEL and GC take, so a burst of ADDs never delays a teardown (ADD and CHECK hold at most the rest); waiting DELs get the next free slot before waiting ADDs")
	fs.IntVar(&c.Calls.MaxQueued, sockserve.FlagMaxQueued, sockserve.DefaultMaxQueued, "ADD and CHECK calls that wait for a slot when all theirs are taken (each costs a goroutine, a socket and its request: a few KiB); one more is refused at once with CNI error 11. 0: refuse at once. DEL and GC are never refused for a full queue (they wait for the next free slot, before any ADD)")
	fs.DurationVar(&c.Calls.MaxWait, sockserve.FlagMaxWait, sockserve.DefaultMaxWait, "longest wait of a call for a slot (and at most half the wait its client allows, so a call that waited still has time to run); then it is refused with CNI error 11")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "rdmanet-daemon keeps the CNI hot path warm: it serves the rdmanet meta CNI shim (--config's daemonSocket) and the\nexec'd rdmanet plugins sriov, rdma and rdmanet-ipam (--plugin-socket). Each plugin and the shim does the work itself when\nthe daemon is not running, so the daemon is never needed for correctness.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, 0
		}
		return c, 2
	}
	return c, -1
}
