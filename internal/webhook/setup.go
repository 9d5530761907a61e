package webhook

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rdmanet/rdmanet/internal/webhook/certs"
)

// ReadyzCheckName is the readiness check Setup adds with ManageCerts: not
// ready until the Secret's certificate is in CertDir and the webhook server
// presents it.
const ReadyzCheckName = "webhook-certs"

// Setup registers the mutating (MutatePath) and validating (ValidatePath,
// EnforcePath) handlers on the manager's webhook server and, with o.ManageCerts, the
// certificate manager as a runnable on every replica (no leader election).
//
// With ManageCerts the webhook server's CertDir must be o.CertDir. The
// server starts before any other runnable and fails without a key pair, so
// Setup writes a short-lived placeholder pair there when none exists; the
// certificate manager replaces it with the Secret's within its first pass
// (seconds), and until then the API server's calls fail TLS verification
// and each webhook's failurePolicy applies; the readiness check
// ReadyzCheckName keeps the replica out of the Service meanwhile.
func Setup(mgr ctrl.Manager, o Options) error {
	o = o.Default()
	if err := o.Validate(); err != nil {
		return err
	}
	srv := mgr.GetWebhookServer()
	if o.ManageCerts {
		if ds, ok := srv.(*webhook.DefaultServer); ok {
			dir := ds.Options.CertDir
			if dir == "" {
				// controller-runtime's default, applied when the server starts.
				dir = filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs")
			}
			if filepath.Clean(dir) != filepath.Clean(o.CertDir) {
				return fmt.Errorf("webhook options: CertDir %q differs from the webhook server's CertDir %q; the certificates would be written where the server does not read them; build the server with webhook.Options{CertDir: %q} or set Options.CertDir to the server's", o.CertDir, dir, o.CertDir)
			}
		}
		cm := CertManager(mgr, o)
		if ds, ok := srv.(*webhook.DefaultServer); ok {
			host, port := ds.Options.Host, ds.Options.Port
			if host == "" {
				host = "127.0.0.1"
			}
			if port == 0 {
				port = webhook.DefaultPort
			}
			cm.ServingAddr = net.JoinHostPort(host, strconv.Itoa(port))
		}
		if err := certs.WritePlaceholder(o.CertDir, cm.Config, time.Now()); err != nil {
			return fmt.Errorf("webhook certificates: placeholder in %s: %w", o.CertDir, err)
		}
		if err := mgr.Add(cm); err != nil {
			return fmt.Errorf("webhook certificates: add to manager: %w", err)
		}
		if err := mgr.AddReadyzCheck(ReadyzCheckName, cm.ReadyCheck); err != nil {
			return fmt.Errorf("webhook certificates: readyz check: %w", err)
		}
	}
	srv.Register(MutatePath, &webhook.Admission{Handler: &Mutator{Reader: mgr.GetAPIReader()}})
	srv.Register(ValidatePath, &webhook.Admission{Handler: &Validator{Reader: mgr.GetAPIReader()}})
	srv.Register(EnforcePath, &webhook.Admission{Handler: &Validator{Reader: mgr.GetAPIReader(), Enforce: true}})
	return nil
}

// CertManager is the certificate manager Setup adds for o (defaulted).
func CertManager(mgr ctrl.Manager, o Options) *certs.Manager {
	return &certs.Manager{
		Config:            certs.Config{Service: o.ServiceName, Namespace: o.Namespace, ExtraSANs: o.ExtraSANs, CALifetime: o.CALifetime, CertLifetime: o.CertLifetime},
		SecretName:        o.SecretName,
		ConfigurationName: o.ConfigurationName,
		CertDir:           o.CertDir,
		Resync:            o.Resync,
		Reader:            mgr.GetAPIReader(),
		Writer:            mgr.GetClient(),
		Log:               mgr.GetLogger().WithName("webhook-certs"),
	}
}

var _ admission.Handler = &Mutator{}
var _ admission.Handler = &Validator{}
