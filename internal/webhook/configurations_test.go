package webhook

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var update = flag.Bool("update", false, "rewrite deploy/controller/webhooks.yaml")

// manifestFile is the configurations deploy/controller installs.
const manifestFile = "../../deploy/controller/webhooks.yaml"

func TestManifestsUpToDate(t *testing.T) {
	want, err := ConfigurationsYAML(DefaultConfigOptions())
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(manifestFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(manifestFile)
	if err != nil {
		t.Fatalf("%v (create it with go test ./internal/webhook -run TestManifestsUpToDate -update)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s is stale; regenerate with go test ./internal/webhook -run TestManifestsUpToDate -update", filepath.ToSlash(manifestFile))
	}
}

func TestConfigurations(t *testing.T) {
	m, v, err := Configurations(DefaultConfigOptions())
	if err != nil {
		t.Fatal(err)
	}
	mw, vw := m.Webhooks[0], v.Webhooks[0]
	tests := []struct {
		name      string
		got, want any
	}{
		{name: "mutating failurePolicy", got: *mw.FailurePolicy, want: admissionregistrationv1.Ignore},
		{name: "validating failurePolicy", got: *vw.FailurePolicy, want: admissionregistrationv1.Fail},
		{name: "sideEffects", got: *vw.SideEffects, want: admissionregistrationv1.SideEffectClassNone},
		{name: "timeout", got: *mw.TimeoutSeconds, want: int32(5)},
		{name: "review versions", got: strings.Join(vw.AdmissionReviewVersions, ","), want: "v1"},
		{name: "mutating path", got: *mw.ClientConfig.Service.Path, want: MutatePath},
		{name: "validating path", got: *vw.ClientConfig.Service.Path, want: ValidatePath},
		{name: "enforcing path", got: *v.Webhooks[1].ClientConfig.Service.Path, want: EnforcePath},
		{name: "validating skips enforced namespaces", got: fmt.Sprint(vw.NamespaceSelector.MatchExpressions[1]), want: fmt.Sprint(metav1.LabelSelectorRequirement{Key: NamespaceLabelEnforce, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"true"}})},
		{name: "enforcing selects enforced namespaces", got: fmt.Sprint(v.Webhooks[1].NamespaceSelector.MatchExpressions[1]), want: fmt.Sprint(metav1.LabelSelectorRequirement{Key: NamespaceLabelEnforce, Operator: metav1.LabelSelectorOpIn, Values: []string{"true"}})},
		{name: "enforcing excludes kube-system too", got: strings.Join(v.Webhooks[1].NamespaceSelector.MatchExpressions[0].Values, ","), want: "kube-system,rdmanet-system"},
		{name: "match condition on every webhook", got: fmt.Sprint(len(mw.MatchConditions), len(vw.MatchConditions), len(v.Webhooks[1].MatchConditions)), want: "1 1 1"},
		{name: "service", got: vw.ClientConfig.Service.Namespace + "/" + vw.ClientConfig.Service.Name, want: "rdmanet-system/rdmanet-controller"},
		{name: "excluded namespaces", got: strings.Join(mw.NamespaceSelector.MatchExpressions[0].Values, ","), want: "kube-system,rdmanet-system"},
		{name: "exclusion operator", got: vw.NamespaceSelector.MatchExpressions[0].Operator, want: metav1.LabelSelectorOpNotIn},
		{name: "operations", got: string(vw.Rules[0].Operations[0]) + " " + vw.Rules[0].Resources[0], want: "CREATE pods"},
		{name: "names", got: m.Name + " " + v.Name, want: DefaultConfigurationName + " " + DefaultConfigurationName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
	errs := []struct {
		name string
		o    ConfigOptions
		want string
	}{
		{name: "bad failure policy", o: ConfigOptions{MutatingFailurePolicy: "Retry"}, want: `failurePolicy "Retry"`},
		{name: "timeout over 10", o: ConfigOptions{TimeoutSeconds: 30}, want: "timeoutSeconds 30 is outside 1..10"},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := Configurations(tt.o); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		want string // "" = valid
	}{
		{name: "defaults", o: Options{ManageCerts: true}},
		{name: "cert-manager: cert fields not checked", o: Options{CertDir: "relative"}},
		{name: "bad namespace", o: Options{Namespace: "RDMA_System"}, want: `Namespace "RDMA_System" is not a DNS label`},
		{name: "relative cert dir", o: Options{ManageCerts: true, CertDir: "certs"}, want: `CertDir "certs" is not an absolute path`},
		{name: "bad SAN", o: Options{ManageCerts: true, ExtraSANs: []string{"not a name"}}, want: `ExtraSANs "not a name"`},
		{name: "short cert", o: Options{ManageCerts: true, CertLifetime: time.Minute}, want: "CertLifetime \"1m0s\" is shorter than an hour"},
		{name: "CA shorter than cert", o: Options{ManageCerts: true, CALifetime: 2 * time.Hour, CertLifetime: 3 * time.Hour}, want: "CALifetime"},
		{name: "resync too long", o: Options{ManageCerts: true, CertLifetime: 3 * time.Hour, Resync: 2 * time.Hour}, want: "Resync"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.o.Default().Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate: %v, want %q", err, tt.want)
			}
		})
	}
}
