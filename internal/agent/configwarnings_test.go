package agent

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

// TestConfigWarningsReachTheOperator: a config with a key in another case
// (IsRdma), an unknown key and an accelerator pool loads; the agent serves
// the other pools, logs each warning once per (re)load naming file and pool
// (structured fields), and its --once report lists the warnings and the
// skipped pool.
func TestConfigWarningsReachTheOperator(t *testing.T) {
	root := t.TempDir()
	if _, err := sysfsfixture.NewStandard(root, sysfsfixture.StandardOptions{}); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(t.TempDir(), "config.json")
	cfg := `{"resourceList":[
	  {"resourcePrefix":"example.com","resourceName":"sriov_rdma","selectors":{"vendors":["15b3"],"pfNames":["enp65s0f0np0"],"IsRdma":true},"excludeTopology":true,"futureKey":1},
	  {"resourceName":"qat","deviceType":"accelerator","selectors":{"vendors":["8086"],"devices":["37c9"]}}]}`
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	a, err := New(Options{SysfsRoot: root, ConfigPaths: []string{cfgPath}, PluginDir: t.TempDir(), DevInfoDir: t.TempDir(),
		NetnsModeFlag: "exclusive", NoDevicePlugin: true, Probe: staticProbe{links: []string{"eno1"}, mode: "exclusive"},
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	a.reconcileLocked(true) // start: no reload
	a.reconcileLocked(true) // a config event: reload, warnings logged again

	type record struct {
		Msg, File, Pool, Field string
	}
	count := map[record]int{}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var r struct {
			Level, Msg, File, Pool, Field string
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if r.Level == "WARN" && strings.HasPrefix(r.Msg, "pool config") {
			count[record{r.Msg, r.File, r.Pool, r.Field}]++
		}
	}
	tests := []struct {
		name        string
		msg         string // substring of the message
		pool, field string
	}{
		{name: "key in another case", msg: `selectors.IsRdma: read as "isRdma"`, pool: "example.com/sriov_rdma", field: "selectors.IsRdma"},
		{name: "unknown key", msg: "futureKey", pool: "example.com/sriov_rdma", field: "futureKey"},
		{name: "accelerator pool skipped (warning)", msg: "pool skipped", pool: "intel.com/qat", field: "deviceType"},
		{name: "accelerator pool skipped (skipped pool)", msg: "pool not served by rdmanet", pool: "intel.com/qat"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			for r, c := range count {
				if strings.Contains(r.Msg, tc.msg) && r.File == cfgPath && r.Pool == tc.pool && (tc.field == "" || r.Field == tc.field) {
					n += c
				}
			}
			if n != 2 {
				t.Errorf("%q logged %d times with file %s and pool %s, want once at start and once on reload; logs:\n%s", tc.msg, n, cfgPath, tc.pool, logs.String())
			}
		})
	}

	// the other pools are served
	snap := a.Last()
	served := map[string]int{}
	for _, p := range snap.Pools {
		if p.Advertised {
			served[p.Resource] = len(p.Devices) + len(p.HCAs)
		}
	}
	if served["example.com/sriov_rdma"] != 16 || len(served) != 1 {
		t.Errorf("served pools = %v, want example.com/sriov_rdma with its 16 VFs", served)
	}
	if s := a.Skipped(); len(s) != 1 || s[0].Resource != "intel.com/qat" || s[0].File != cfgPath {
		t.Errorf("Skipped() = %+v, want intel.com/qat of %s", s, cfgPath)
	}

	// the --once report carries them, in JSON and in text
	c, err := LoadConfigFiles([]string{cfgPath})
	if err != nil {
		t.Fatal(err)
	}
	rep := NewReport(snap)
	rep.AddConfig(c)
	var js, text bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var got struct {
		SkippedPools []struct {
			File, Resource, Reason string
		} `json:"skipped_pools"`
		ConfigWarnings []struct {
			File, Pool, Field, Message string
		} `json:"config_warnings"`
	}
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.SkippedPools) != 1 || got.SkippedPools[0].Resource != "intel.com/qat" || !strings.Contains(got.SkippedPools[0].Reason, "accelerator") {
		t.Errorf("skipped_pools = %+v", got.SkippedPools)
	}
	fields := map[string]string{}
	for _, w := range got.ConfigWarnings {
		fields[w.Field] = w.Pool
		if w.File != cfgPath || w.Message == "" {
			t.Errorf("config warning %+v lacks file or message", w)
		}
	}
	for f, p := range map[string]string{"selectors.IsRdma": "example.com/sriov_rdma", "futureKey": "example.com/sriov_rdma", "deviceType": "intel.com/qat"} {
		if fields[f] != p {
			t.Errorf("config_warnings: field %s with pool %q, want %q (all: %v)", f, fields[f], p, fields)
		}
	}
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`config warning: ` + cfgPath + `: resourceList[0] (example.com/sriov_rdma): selectors.IsRdma`, "pool intel.com/qat (" + cfgPath + "): not served by rdmanet"} {
		if !strings.Contains(text.String(), w) {
			t.Errorf("text report lacks %q:\n%s", w, text.String())
		}
	}
}

// TestConfigOfOnlySkippedPoolsIsRefused: files that leave rdmanet nothing
// to serve are an error naming each skipped pool; such a file next to
// another is fine.
func TestConfigOfOnlySkippedPoolsIsRefused(t *testing.T) {
	dir := t.TempDir()
	accel := filepath.Join(dir, "accel.json")
	rdma := filepath.Join(dir, "rdma.json")
	if err := os.WriteFile(accel, []byte(`{"resourceList":[{"resourceName":"qat","deviceType":"accelerator","selectors":{"vendors":["8086"]}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rdma, []byte(`{"configList":[{"resourceName":"s","rdmaHcaMax":3,"selectors":{"ifNames":["p0"]}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		paths   []string
		wantErr string
		pools   int
	}{
		{name: "only an accelerator pool", paths: []string{accel}, wantErr: accel + ": intel.com/qat"},
		{name: "an accelerator file next to an RDMA one", paths: []string{accel, rdma}, pools: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := LoadConfigFiles(tc.paths)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "fix:") {
					t.Fatalf("err = %v, want one naming %q with a fix", err, tc.wantErr)
				}
				return
			}
			if err != nil || len(c.Pools) != tc.pools || len(c.Skipped) != 1 {
				t.Fatalf("LoadConfigFiles = %+v, %v", c, err)
			}
		})
	}
}
