package webhook

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
)

func TestSetup(t *testing.T) {
	newMgr := func(t *testing.T, certDir string) ctrl.Manager {
		t.Helper()
		// No API server is contacted before Start.
		mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, ctrl.Options{
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			WebhookServer:          crwebhook.NewServer(crwebhook.Options{Port: 1, CertDir: certDir}),
		})
		if err != nil {
			t.Fatal(err)
		}
		return mgr
	}
	tests := []struct {
		name        string
		serverDir   string // "" = the test's dir
		opts        func(dir string) Options
		wantErr     string
		wantFiles   bool
		wantHandler bool
	}{
		{name: "managed certificates", opts: func(dir string) Options { return Options{ManageCerts: true, CertDir: dir} }, wantFiles: true, wantHandler: true},
		{name: "cert-manager: nothing written", opts: func(dir string) Options { return Options{CertDir: dir} }, wantHandler: true},
		{name: "cert dir differs from the server's", serverDir: "/elsewhere", opts: func(dir string) Options { return Options{ManageCerts: true, CertDir: dir} },
			wantErr: `differs from the webhook server's CertDir "/elsewhere"`},
		{name: "invalid options", opts: func(dir string) Options { return Options{ManageCerts: true, CertDir: "rel"} }, wantErr: `CertDir "rel" is not an absolute path`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "certs")
			sd := tt.serverDir
			if sd == "" {
				sd = dir
			}
			mgr := newMgr(t, sd)
			err := Setup(mgr, tt.opts(dir))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Setup: %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_, statErr := os.Stat(filepath.Join(dir, "tls.crt"))
			if got := statErr == nil; got != tt.wantFiles {
				t.Errorf("placeholder written = %v, want %v", got, tt.wantFiles)
			}
			mux := mgr.GetWebhookServer().WebhookMux()
			for _, p := range []string{MutatePath, ValidatePath} {
				if _, pattern := mux.Handler(httpGet(p)); (pattern == p) != tt.wantHandler {
					t.Errorf("handler for %s: pattern %q", p, pattern)
				}
			}
		})
	}
}

func httpGet(path string) *http.Request {
	r, _ := http.NewRequest(http.MethodPost, "https://x"+path, nil)
	return r
}
