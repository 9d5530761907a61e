package controller

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	defaults := Options{LeaderElect: true, MetricsAddr: DefaultMetricsAddr, HealthAddr: DefaultHealthAddr, LogFormat: "text", LogLevel: "info", SweepInterval: DefaultSweepInterval,
		Webhooks: true, WebhookPort: DefaultWebhookPort, CertDir: "/tmp/k8s-webhook-server/serving-certs", ManageCerts: true}
	tests := []struct {
		name    string
		args    []string
		want    Options
		wantErr []string // substrings of the error; nil: success
	}{
		{name: "defaults", want: defaults},
		{
			name: "every flag",
			args: []string{"--kubeconfig=/k", "--leader-elect=false", "--metrics-addr=127.0.0.1:9000", "--health-addr=[::1]:9001", "--log-format=json", "--log-level=debug", "--sweep-interval=30s",
				"--webhook-port=10250", "--cert-dir=/certs", "--manage-certs=false"},
			want: Options{Kubeconfig: "/k", MetricsAddr: "127.0.0.1:9000", HealthAddr: "[::1]:9001", LogFormat: "json", LogLevel: "debug", SweepInterval: 30 * time.Second,
				Webhooks: true, WebhookPort: 10250, CertDir: "/certs"},
		},
		{
			name: "webhooks off: their flags are not checked",
			args: []string{"--webhooks=false", "--webhook-port=0", "--cert-dir=relative"},
			want: func() Options { o := defaults; o.Webhooks, o.WebhookPort, o.CertDir = false, 0, "relative"; return o }(),
		},
		{
			name: "endpoints off",
			args: []string{"--metrics-addr=0", "--health-addr=0"},
			want: func() Options { o := defaults; o.MetricsAddr, o.HealthAddr = "0", "0"; return o }(),
		},
		{name: "version", args: []string{"--version"}, want: func() Options { o := defaults; o.Version = true; return o }()},
		{name: "bad log format", args: []string{"--log-format=xml"}, wantErr: []string{`--log-format="xml"`, "text or json"}},
		{name: "bad log level", args: []string{"--log-level=loud"}, wantErr: []string{`--log-level="loud"`}},
		{name: "sweep too often", args: []string{"--sweep-interval=1s"}, wantErr: []string{"--sweep-interval=1s", "at least 10s", "fix:"}},
		{name: "address without port", args: []string{"--metrics-addr=localhost"}, wantErr: []string{`--metrics-addr="localhost"`, "fix:"}},
		{name: "port out of range", args: []string{"--health-addr=:70000"}, wantErr: []string{`--health-addr=":70000"`, "0 to 65535"}},
		{name: "webhook port out of range", args: []string{"--webhook-port=0"}, wantErr: []string{"--webhook-port=0", "1 to 65535", "fix:"}},
		{name: "relative cert dir", args: []string{"--cert-dir=certs"}, wantErr: []string{`--cert-dir="certs"`, "absolute", "fix:"}},
		{name: "same port twice", args: []string{"--metrics-addr=:9000", "--health-addr=:9000"}, wantErr: []string{"both", "different ports"}},
		{name: "two errors at once", args: []string{"--log-format=xml", "--sweep-interval=0s"}, wantErr: []string{"--log-format", "--sweep-interval"}},
		{name: "positional argument", args: []string{"run"}, wantErr: []string{`unexpected argument "run"`}},
		{name: "unknown flag", args: []string{"--frobnicate"}, wantErr: []string{"frobnicate"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			got, err := ParseFlags(tc.args, &out)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("ParseFlags(%q) = %+v, want an error", tc.args, got)
				}
				for _, s := range tc.wantErr {
					if !strings.Contains(err.Error()+out.String(), s) {
						t.Errorf("error %q (output %q) does not contain %q", err, out.String(), s)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseFlags(%q): %v", tc.args, err)
			}
			if got.Kubeconfig != tc.want.Kubeconfig || got.LeaderElect != tc.want.LeaderElect || got.MetricsAddr != tc.want.MetricsAddr ||
				got.HealthAddr != tc.want.HealthAddr || got.LogFormat != tc.want.LogFormat || got.LogLevel != tc.want.LogLevel ||
				got.SweepInterval != tc.want.SweepInterval || got.Version != tc.want.Version || got.Webhooks != tc.want.Webhooks ||
				got.WebhookPort != tc.want.WebhookPort || got.CertDir != tc.want.CertDir || got.ManageCerts != tc.want.ManageCerts {
				t.Errorf("ParseFlags(%q) = %+v, want %+v", tc.args, got, tc.want)
			}
		})
	}
}

func TestParseFlagsHelp(t *testing.T) {
	var out bytes.Buffer
	_, err := ParseFlags([]string{"--help"}, &out)
	if !errors.Is(err, ErrHelp) {
		t.Fatalf("--help: %v, want ErrHelp", err)
	}
	for _, f := range []string{"-kubeconfig", "-leader-elect", "-metrics-addr", "-health-addr", "-log-format", "-log-level", "-sweep-interval", "-version", "IPAM garbage collection", "rdmanet.io/pool.", LeaseName} {
		if !strings.Contains(out.String(), f) {
			t.Errorf("--help does not mention %q:\n%s", f, out.String())
		}
	}
}
