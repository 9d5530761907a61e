package install

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/rdmanet/rdmanet/internal/version"
)

const usage = `rdmanet-install installs rdmanet's CNI binaries and configuration on a node
(the rdmanet-node DaemonSet's init container; the image has no shell), or
removes them with --uninstall.

Install, in order:
  1. refuses to replace a newer rdmanet install (the version recorded in
     --manifest, or reported by the installed rdmanet binary) unless --force;
  2. checks every input before writing anything: the binaries in --src-dir,
     the pod's projected token volume --token-dir/{token,ca.crt}, the
     ConfigMap files --config-dir/{00-rdmanet.conf,rdmanet-ipam.conf};
  3. copies --binaries into --cni-bin-dir, each atomically (temporary file in
     the same directory, fsync, rename: a running plugin keeps its file), and
     rdmanet-ipam also as "whereabouts" per --install-as-whereabouts;
  4. writes the node's credential <conf>/rdmanet.d/{token,ca.crt} (the pod's
     bound, expiring ServiceAccount token: rdmanet-agent --host-token-file
     keeps it fresh), the kubeconfigs <conf>/rdmanet.d/rdmanet.kubeconfig and
     <conf>/rdmanet-ipam.d/rdmanet-ipam.kubeconfig that read it (server
     https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT, tokenFile),
     rdmanet-ipam.d/rdmanet-ipam.conf (and rdmanet-ipam.d/guid-pool.json
     with --guid-pool-config), and last 00-rdmanet.conf (the runtime
     uses rdmanet from then on). Identical files are left untouched.
  5. removes what an earlier install put there and this one does not (the
     long-lived tokens releases before 0.3 copied: rdmanet-ipam.d/token), and
     records every file with its checksum in --manifest.

--install-as-whereabouts:
  auto   (default) install rdmanet-ipam as "whereabouts" only when no
         whereabouts binary is there or the one there is rdmanet's own (its Go
         build info says so); another project's whereabouts is never
         overwritten: the log says so, networks of "type": "whereabouts" keep
         using it, and "kubectl rdma doctor" warns.
  true   install it; where another whereabouts is there, fail unless --force
         (then replace it: see docs/deploy.md "Migrating from Whereabouts").
  false  do not install it (one an earlier rdmanet install put there is removed).

--uninstall removes exactly the files the manifest lists, each only while it
is still rdmanet's (same checksum, or an rdmanet build of that binary),
00-rdmanet.conf first; then the manifest and rdmanet.d/, rdmanet-ipam.d/ when
empty. Other files stay.

The paths are the DaemonSet's mounts by default. --cni-conf-dir must be
mounted at the host's own path: the kubeconfigs name files in it by that path.

Exit status: 0 done, 1 failed or refused (nothing or only complete files
written; 00-rdmanet.conf is written last), 2 bad usage.

Flags:
`

// Main is the command: flags → Options → Install or Uninstall. getenv
// supplies KUBERNETES_SERVICE_HOST/PORT.
func Main(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	o := DefaultOptions()
	fs := flag.NewFlagSet("rdmanet-install", flag.ContinueOnError)
	fs.SetOutput(stderr)
	version.Flag(fs, "rdmanet-install")
	fs.StringVar(&o.SrcDir, "src-dir", o.SrcDir, "directory holding the binaries to install (the image's)")
	fs.StringVar(&o.CNIBinDir, "cni-bin-dir", o.CNIBinDir, "the node's CNI bin directory (/opt/cni/bin) as mounted in this container")
	fs.StringVar(&o.CNIConfDir, "cni-conf-dir", o.CNIConfDir, "the node's CNI config directory, mounted at the host's path")
	fs.StringVar(&o.ConfigDir, "config-dir", o.ConfigDir, "the rdmanet-node-config ConfigMap: 00-rdmanet.conf, rdmanet-ipam.conf")
	fs.StringVar(&o.TokenDir, "token-dir", o.TokenDir, "the pod's projected volume: token (its bound, expiring ServiceAccount token) and ca.crt (ConfigMap kube-root-ca.crt)")
	fs.StringVar(&o.GUIDPoolConfig, "guid-pool-config", "", "the InfiniBand GUID pool config (ConfigMap rdmanet-guid-pool, key guid-pool.json) to install as <cni-conf-dir>/rdmanet-ipam.d/guid-pool.json, which ib-sriov reads when run by the host fallback; unset: none (an earlier one is removed)")
	fs.StringVar(&o.Manifest, "manifest", "", "install manifest: the version and files installed (default <cni-conf-dir>/rdmanet.d/install.json)")
	binaries := fs.String("binaries", strings.Join(o.Binaries, ","), "comma-separated binaries of --src-dir to install")
	fs.StringVar(&o.AsWhereabouts, "install-as-whereabouts", o.AsWhereabouts, "auto, true or false: also install rdmanet-ipam as \"whereabouts\" (see above)")
	fs.BoolVar(&o.Force, "force", false, "downgrade a newer install; with --install-as-whereabouts=true, replace another whereabouts")
	fs.StringVar(&o.APIServer, "api-server", "", "API server URL for the kubeconfigs (default https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT)")
	uninstall := fs.Bool("uninstall", false, "remove what the manifest lists instead of installing")
	logFormat := fs.String("log-format", "text", "text or json (logs go to stderr)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "rdmanet-install: unexpected arguments %q (every input is a flag; see --help)\n", fs.Args())
		return 2
	}
	var h slog.Handler
	switch *logFormat {
	case "text":
		h = slog.NewTextHandler(stderr, nil)
	case "json":
		h = slog.NewJSONHandler(stderr, nil)
	default:
		fmt.Fprintf(stderr, "rdmanet-install: --log-format=%q: must be text or json\n", *logFormat)
		return 2
	}
	o.Log = slog.New(h)
	o.Binaries = nil
	for _, b := range strings.Split(*binaries, ",") {
		if b = strings.TrimSpace(b); b != "" {
			o.Binaries = append(o.Binaries, b)
		}
	}
	// One binary at a time is in memory (the largest, rdmanet-direct, ~50 MB):
	// a soft limit keeps the garbage of the previous one from doubling the
	// peak (about 56 MiB RSS instead of 85), well inside the init container's limit.
	if getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(32 << 20)
	}
	o.Version = version.Get()
	o.Installer = version.String("rdmanet-install")
	if *uninstall {
		if _, err := Uninstall(o); err != nil {
			fmt.Fprintf(stderr, "rdmanet-install: uninstall: %v\n", err)
			return 1
		}
		return 0
	}
	if o.APIServer == "" {
		u, err := ServerURL(getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT"))
		if err != nil {
			fmt.Fprintf(stderr, "rdmanet-install: %v\n", err)
			return 2
		}
		o.APIServer = u
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if _, err := Install(ctx, o); err != nil {
		fmt.Fprintf(stderr, "rdmanet-install: %v\n", err)
		return 1
	}
	return 0
}
