// Package controller is rdmanet-controller: one controller-runtime manager,
// leader-elected, hosting the IPAM garbage collector (ipamgc.go: addresses of
// deleted and terminal pods released within seconds, plus a periodic full
// sweep) and the node labeler (nodelabels.go: rdmanet.io/pool.* and
// rdmanet.io/rdma-netns-mode labels). Other parts (the admission webhooks)
// join the same manager through Options.Setup.
package controller

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/rdmanet/rdmanet/internal/guidpool"
	"github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/internal/ipam/gc"
	"github.com/rdmanet/rdmanet/internal/telemetry"
	"github.com/rdmanet/rdmanet/internal/webhook"
)

// Names of the objects the controller uses in its namespace.
const (
	// DefaultNamespace holds the leader election Lease and the agent's ConfigMap.
	DefaultNamespace = "rdmanet-system"
	// LeaseName is the leader election Lease (and the controller's name).
	LeaseName = "rdmanet-controller"
	// AgentConfigMap is rdmanet-agent's pool configuration (deploy/node-config.yaml).
	AgentConfigMap = "rdmanet-agent-config"
)

// Defaults of the flags and of the leader election timings.
const (
	DefaultSweepInterval = 10 * time.Minute
	DefaultMetricsAddr   = ":8080"
	DefaultHealthAddr    = ":8081"
	DefaultWebhookPort   = 9443
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
	// MinSweepInterval bounds --sweep-interval: a sweep lists every block and pod.
	MinSweepInterval = 10 * time.Second
)

// Options configure rdmanet-controller. ParseFlags fills the flag fields;
// the rest are for tests and for code that embeds the controller.
type Options struct {
	Kubeconfig    string        // --kubeconfig: "" = in-cluster service account
	LeaderElect   bool          // --leader-elect
	MetricsAddr   string        // --metrics-addr: host:port, "0" = off
	HealthAddr    string        // --health-addr: host:port, "0" = off
	LogFormat     string        // --log-format: text or json
	LogLevel      string        // --log-level
	SweepInterval time.Duration // --sweep-interval
	Version       bool          // --version: print and exit (main does it)
	// The admission webhooks (internal/webhook, docs/webhook.md).
	Webhooks    bool   // --webhooks: serve /mutate-pod and /validate-pod
	WebhookPort int    // --webhook-port: the webhook server's TLS port
	CertDir     string // --cert-dir: the serving key pair (tls.crt, tls.key)
	ManageCerts bool   // --manage-certs: own CA, Secret and caBundle (false: cert-manager)
	// GUIDPoolConfigs (--guid-pool-config, repeatable): GUID pool config
	// files whose hooks run when the IPAM GC frees a GUID (guidhook.go).
	GUIDPoolConfigs []string
	// GUIDHooks are added to the hooks of GUIDPoolConfigs (tests, embedders).
	GUIDHooks map[string]guidpool.HookRunner

	// Namespace of the Lease and the agent ConfigMap ("" = DefaultNamespace).
	Namespace string
	// Leader election timings (0 = the Default* above).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Grace of the periodic sweep (0 = gc.DefaultGrace, gc.NoGrace = none).
	// The event-driven release of deleted and terminal pods has none.
	Grace time.Duration
	// RestConfig, when set, is used instead of Kubeconfig (tests).
	RestConfig *rest.Config
	// Logger for controller-runtime and the reconcilers (zero: discard).
	Logger logr.Logger
	// Setup functions run, in order, on the new manager before it starts:
	// the place to add webhooks and more controllers to it. Controllers and
	// runnables they add run on the leader only, unless they implement
	// manager.LeaderElectionRunnable with false (a certificate rotator
	// must: every replica serves); webhooks (mgr.GetWebhookServer()) serve
	// on every replica.
	Setup []func(ctrl.Manager) error
	// WebhookServer is the manager's webhook server (nil: controller-runtime's
	// default, port 9443, certificates in /tmp/k8s-webhook-server/serving-certs,
	// started only when a Setup registers a webhook).
	WebhookServer crwebhook.Server
}

// ErrHelp is returned by ParseFlags for -h/--help (the usage is printed).
var ErrHelp = flag.ErrHelp

// ParseFlags parses rdmanet-controller's command line, applies defaults and
// validates: no file or network access. Usage and flag errors go to output.
func ParseFlags(args []string, output io.Writer) (Options, error) {
	fs := flag.NewFlagSet("rdmanet-controller", flag.ContinueOnError)
	fs.SetOutput(output)
	var o Options
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file of the cluster; empty: the pod's in-cluster service account")
	fs.BoolVar(&o.LeaderElect, "leader-elect", true, "run the loops only while holding the Lease "+DefaultNamespace+"/"+LeaseName+", so replicas can run side by side (false: act at once, for a single replica)")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", DefaultMetricsAddr, "serve Prometheus /metrics (controller-runtime's and rdmanet_controller_*; docs/controller.md) on this host:port; \"0\" turns it off")
	fs.StringVar(&o.HealthAddr, "health-addr", DefaultHealthAddr, "serve /healthz (liveness) and /readyz (readiness) on this host:port; \"0\" turns it off")
	fs.StringVar(&o.LogFormat, "log-format", telemetry.LogText, "log format on stderr: text or json")
	fs.StringVar(&o.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.DurationVar(&o.SweepInterval, "sweep-interval", DefaultSweepInterval, "how often the leader runs a full IPAM garbage collection sweep (addresses of pods deleted while no controller was watching, blocks of deleted nodes; allocations younger than 10m are kept). Deleted and terminal pods are released at once, not by the sweep")
	fs.BoolVar(&o.Webhooks, "webhooks", true, "serve the admission webhooks "+webhook.MutatePath+" (opt-in pods get what their RDMA mode needs) and "+webhook.ValidatePath+" (the kubectl rdma lint rules; errors deny) on every replica; docs/webhook.md")
	fs.IntVar(&o.WebhookPort, "webhook-port", DefaultWebhookPort, "TLS port of the webhook server (the Service "+webhook.DefaultServiceName+" targets it)")
	fs.StringVar(&o.CertDir, "cert-dir", webhook.DefaultCertDir, "directory of the webhook server's tls.crt and tls.key (with --manage-certs the controller writes them there)")
	fs.BoolVar(&o.ManageCerts, "manage-certs", true, "create and rotate a self-signed CA and serving certificate (Secret "+webhook.DefaultNamespace+"/"+webhook.DefaultSecretName+") and patch its CA into the webhook configurations; false when cert-manager's CA injector provides them (mount its Secret at --cert-dir)")
	fs.Func("guid-pool-config", "a GUID pool config file (the nodes' guid-pool.json, docs/infiniband.md; repeatable, one per pool): when the IPAM GC frees a GUID of that pool (its pod gone without a DEL), the pool's hook runs here first, with the release event; the GUID stays allocated until the hook succeeds", func(s string) error {
		if !filepath.IsAbs(s) {
			return fmt.Errorf("%q: must be an absolute path; fix: e.g. --guid-pool-config=/etc/rdmanet/guid-pool.json", s)
		}
		o.GUIDPoolConfigs = append(o.GUIDPoolConfigs, s)
		return nil
	})
	fs.BoolVar(&o.Version, "version", false, "print the version and exit")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `rdmanet-controller runs rdmanet's cluster-wide loops (docs/controller.md):
  - IPAM garbage collection: the addresses of a deleted or terminal
    (Succeeded/Failed) pod are released within seconds; a periodic sweep
    collects the rest.
  - node labels: rdmanet.io/pool.<prefix>_<name>=true for every rdmanet pool
    (rdmanet-system/rdmanet-agent-config) the node serves, and
    rdmanet.io/rdma-netns-mode from the node's annotation of that name.
Only the leader acts (Lease rdmanet-system/rdmanet-controller).
Every replica serves the admission webhooks (--webhooks): a pod annotated
rdmanet.io/network=<namespace>/<nad> gets the networks annotation, the NAD's
resource, IPC_LOCK and NCCL environment; pods that break an error-level
kubectl rdma lint rule are denied with the rule, the field and the fix
(docs/webhook.md).

Usage:
  rdmanet-controller [flags]

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return Options{}, err
	}
	if fs.NArg() > 0 {
		return Options{}, fmt.Errorf("rdmanet-controller: unexpected argument %q; fix: give flags only (--help lists them)", fs.Arg(0))
	}
	return o, o.Validate()
}

// Validate checks the flag fields.
func (o Options) Validate() error {
	var errs []error
	if o.LogFormat != telemetry.LogText && o.LogFormat != telemetry.LogJSON {
		errs = append(errs, fmt.Errorf("--log-format=%q: must be %s or %s", o.LogFormat, telemetry.LogText, telemetry.LogJSON))
	}
	if _, err := telemetry.NewLogger(io.Discard, telemetry.LogText, o.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if o.SweepInterval < MinSweepInterval {
		errs = append(errs, fmt.Errorf("--sweep-interval=%s: must be at least %s (a sweep lists every IPAM block and pod); fix: e.g. --sweep-interval=10m", o.SweepInterval, MinSweepInterval))
	}
	for _, a := range []struct{ flag, addr string }{{"--metrics-addr", o.MetricsAddr}, {"--health-addr", o.HealthAddr}} {
		if err := checkAddr(a.addr); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w; fix: give host:port (e.g. :8080) or 0 to turn it off", a.flag, a.addr, err))
		}
	}
	if o.Webhooks && (o.WebhookPort < 1 || o.WebhookPort > 65535) {
		errs = append(errs, fmt.Errorf("--webhook-port=%d: must be from 1 to 65535; fix: e.g. --webhook-port=%d (the Service's targetPort)", o.WebhookPort, DefaultWebhookPort))
	}
	if o.Webhooks && !filepath.IsAbs(o.CertDir) {
		errs = append(errs, fmt.Errorf("--cert-dir=%q: must be an absolute path; fix: e.g. --cert-dir=%s", o.CertDir, webhook.DefaultCertDir))
	}
	if o.MetricsAddr != "0" && o.MetricsAddr == o.HealthAddr {
		errs = append(errs, fmt.Errorf("--metrics-addr and --health-addr are both %q; fix: give them different ports", o.MetricsAddr))
	}
	return errors.Join(errs...)
}

func checkAddr(addr string) error {
	if addr == "0" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	return nil
}

func (o Options) namespace() string {
	if o.Namespace == "" {
		return DefaultNamespace
	}
	return o.Namespace
}

var skipNameValidation = true

func orDefault(d, def time.Duration) *time.Duration {
	if d <= 0 {
		d = def
	}
	return &d
}

// restConfig returns the API server config of --kubeconfig (or in-cluster).
func (o Options) restConfig() (*rest.Config, error) {
	if o.RestConfig != nil {
		return rest.CopyConfig(o.RestConfig), nil
	}
	if o.Kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster config: %w; fix: run in a pod with a service account, or give --kubeconfig", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig=%s: %w; fix: point it at a readable kubeconfig file", o.Kubeconfig, err)
	}
	return cfg, nil
}

// NewManager builds the manager with the IPAM GC and the node labeler, runs
// o.Setup on it and returns it unstarted.
func NewManager(o Options) (ctrl.Manager, error) {
	cfg, err := o.restConfig()
	if err != nil {
		return nil, fmt.Errorf("rdmanet-controller: %w", err)
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "rdmanet-controller"
	}
	if cfg.QPS == 0 && cfg.Burst == 0 {
		// client-go's 5/10 would pace a sweep's block updates.
		cfg.QPS, cfg.Burst = 50, 100
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	ns := o.namespace()
	metricsAddr, healthAddr := o.MetricsAddr, o.HealthAddr
	if healthAddr == "" {
		healthAddr = "0"
	}
	if metricsAddr == "" {
		metricsAddr = "0"
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Logger:                        o.Logger,
		LeaderElection:                o.LeaderElect,
		LeaderElectionNamespace:       ns,
		LeaderElectionID:              LeaseName,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 orDefault(o.LeaseDuration, DefaultLeaseDuration),
		RenewDeadline:                 orDefault(o.RenewDeadline, DefaultRenewDeadline),
		RetryPeriod:                   orDefault(o.RetryPeriod, DefaultRetryPeriod),
		Metrics:                       metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:        healthAddr,
		WebhookServer:                 o.webhookServer(),
		// The binary builds one manager; tests build several in one
		// process, which the global unique-name check would refuse.
		Controller: config.Controller{SkipNameValidation: &skipNameValidation},
		Cache: cache.Options{
			DefaultTransform: stripObject,
			ByObject: map[client.Object]cache.ByObject{
				// Only the agent's ConfigMap: RBAC grants no other.
				&corev1.ConfigMap{}: {
					Namespaces: map[string]cache.Config{ns: {}},
					Field:      fields.OneTermEqualSelector("metadata.name", AgentConfigMap),
				},
			},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("rdmanet-controller: manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	store, err := ipam.NewKubeStore(cfg)
	if err != nil {
		return nil, fmt.Errorf("rdmanet-controller: %w", err)
	}
	cluster, err := gc.NewKubeCluster(cfg)
	if err != nil {
		return nil, fmt.Errorf("rdmanet-controller: %w", err)
	}
	hooks, warnings, err := LoadGUIDHooks(o.GUIDPoolConfigs)
	if err != nil {
		return nil, fmt.Errorf("rdmanet-controller: %w", err)
	}
	for _, w := range warnings {
		o.Logger.Info("warning: " + w)
	}
	maps.Copy(hooks, o.GUIDHooks)
	g := &IPAMGC{
		Store:         store,
		Cluster:       cluster,
		Informers:     mgr.GetCache(),
		SweepInterval: o.SweepInterval,
		Grace:         o.Grace,
		Log:           o.Logger.WithName("ipam-gc"),
		GUIDHooks:     hooks,
		Recorder:      mgr.GetEventRecorder(LeaseName),
	}
	if err := mgr.Add(g); err != nil {
		return nil, fmt.Errorf("rdmanet-controller: add ipam gc: %w", err)
	}
	if err := (&NodeLabeler{Namespace: ns, Recorder: mgr.GetEventRecorder(LeaseName)}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("rdmanet-controller: node labeler: %w", err)
	}
	if o.Webhooks {
		if err := webhook.Setup(mgr, webhook.Options{ManageCerts: o.ManageCerts, Namespace: ns, CertDir: o.CertDir}); err != nil {
			return nil, fmt.Errorf("rdmanet-controller: webhooks: %w", err)
		}
	}
	for i, setup := range o.Setup {
		if err := setup(mgr); err != nil {
			return nil, fmt.Errorf("rdmanet-controller: setup %d: %w", i, err)
		}
	}
	return mgr, nil
}

// webhookServer is o.WebhookServer, or with --webhooks one on
// --webhook-port reading --cert-dir.
func (o Options) webhookServer() crwebhook.Server {
	if o.WebhookServer != nil || !o.Webhooks {
		return o.WebhookServer
	}
	return crwebhook.NewServer(crwebhook.Options{Port: o.WebhookPort, CertDir: o.CertDir})
}

// Run builds the manager and runs it until ctx ends.
func Run(ctx context.Context, o Options) error {
	mgr, err := NewManager(o)
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}
