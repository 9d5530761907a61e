package webhook

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Defaults of Options.
const (
	DefaultNamespace         = "rdmanet-system"
	DefaultServiceName       = "rdmanet-controller"
	DefaultSecretName        = "rdmanet-controller-webhook-certs"
	DefaultConfigurationName = "rdmanet-controller"
	DefaultCertDir           = "/tmp/k8s-webhook-server/serving-certs"
	DefaultCALifetime        = 10 * 365 * 24 * time.Hour
	DefaultCertLifetime      = 365 * 24 * time.Hour
	DefaultResync            = 10 * time.Minute
)

// Webhook paths served on the manager's webhook server.
const (
	MutatePath   = "/mutate-pod"
	ValidatePath = "/validate-pod"
	// EnforcePath validates pods of namespaces labelled
	// NamespaceLabelEnforce=true: every RDMA pod's errors deny.
	EnforcePath = "/validate-pod-enforce"
)

// Options configure Setup. The zero value plus Default() is a working
// configuration for the in-cluster Deployment of deploy/.
type Options struct {
	// ManageCerts makes the controller create and rotate its own CA and
	// serving certificate (Secret SecretName in Namespace), write them to
	// CertDir and patch the CA bundle into the webhook configurations.
	// false: certificates come from elsewhere (cert-manager's CA injector);
	// nothing is done to certificates or caBundle fields.
	ManageCerts bool
	// Namespace of the controller's Service and certificate Secret.
	Namespace string
	// ServiceName is the Service in front of the webhook server; the serving
	// certificate is for <ServiceName>.<Namespace>.svc.
	ServiceName string
	// SecretName holds ca.crt, ca.key, tls.crt, tls.key.
	SecretName string
	// ConfigurationName names the MutatingWebhookConfiguration and the
	// ValidatingWebhookConfiguration whose caBundle is patched.
	ConfigurationName string
	// CertDir must be the webhook server's CertDir (tls.crt, tls.key).
	CertDir string
	// ExtraSANs are additional DNS names or IP addresses for the serving
	// certificate (a webhook reached by URL, tests on 127.0.0.1).
	ExtraSANs []string
	// CALifetime and CertLifetime of generated certificates; each is
	// renewed after 2/3 of its lifetime.
	CALifetime   time.Duration
	CertLifetime time.Duration
	// Resync is how often every replica re-reads the Secret, renews what is
	// due and re-patches caBundle fields.
	Resync time.Duration
}

// Default fills unset fields.
func (o Options) Default() Options {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&o.Namespace, DefaultNamespace)
	def(&o.ServiceName, DefaultServiceName)
	def(&o.SecretName, DefaultSecretName)
	def(&o.ConfigurationName, DefaultConfigurationName)
	def(&o.CertDir, DefaultCertDir)
	if o.CALifetime == 0 {
		o.CALifetime = DefaultCALifetime
	}
	if o.CertLifetime == 0 {
		o.CertLifetime = DefaultCertLifetime
	}
	if o.Resync == 0 {
		o.Resync = DefaultResync
	}
	return o
}

// Validate checks defaulted options; the error names the field, the value,
// the rule and the fix.
func (o Options) Validate() error {
	bad := func(field, value, rule, fix string) error {
		return fmt.Errorf("webhook options: %s %q %s; %s", field, value, rule, fix)
	}
	for _, f := range []struct{ field, v string }{{"Namespace", o.Namespace}, {"ServiceName", o.ServiceName}} {
		if errs := validation.IsDNS1123Label(f.v); len(errs) > 0 {
			return bad(f.field, f.v, "is not a DNS label ("+strings.Join(errs, "; ")+")", "use lowercase letters, digits and '-'")
		}
	}
	for _, f := range []struct{ field, v string }{{"SecretName", o.SecretName}, {"ConfigurationName", o.ConfigurationName}} {
		if errs := validation.IsDNS1123Subdomain(f.v); len(errs) > 0 {
			return bad(f.field, f.v, "is not a valid object name ("+strings.Join(errs, "; ")+")", "use lowercase letters, digits, '-' and '.'")
		}
	}
	if o.ManageCerts {
		if !filepath.IsAbs(o.CertDir) {
			return bad("CertDir", o.CertDir, "is not an absolute path", "give the webhook server's CertDir, e.g. "+DefaultCertDir)
		}
		for _, s := range o.ExtraSANs {
			if net.ParseIP(s) == nil && len(validation.IsDNS1123Subdomain(strings.TrimPrefix(s, "*."))) > 0 {
				return bad("ExtraSANs", s, "is neither an IP address nor a DNS name", "remove it or fix the spelling")
			}
		}
		if o.CertLifetime < time.Hour {
			return bad("CertLifetime", o.CertLifetime.String(), "is shorter than an hour", "use at least 1h (default 8760h)")
		}
		if o.CALifetime < o.CertLifetime {
			return bad("CALifetime", o.CALifetime.String(), "is shorter than CertLifetime "+o.CertLifetime.String(), "make the CA live at least as long as the serving certificate")
		}
		if o.Resync <= 0 || o.Resync > o.CertLifetime/3 {
			return bad("Resync", o.Resync.String(), "must be positive and at most a third of CertLifetime (renewal starts at 2/3 of it)", "use e.g. 10m")
		}
	}
	return nil
}
