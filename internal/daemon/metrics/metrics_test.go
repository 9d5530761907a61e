package metrics

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/rdmanet/rdmanet/internal/cni/meta"
	"github.com/rdmanet/rdmanet/internal/daemon/sockserve"
)

// page is the registry's exposition text.
func page(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("/metrics: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

func TestObservers(t *testing.T) {
	busy := types.NewError(types.ErrTryAgainLater, "another CNI call holds container c1", "")
	tests := []struct {
		name    string
		observe func(m *Metrics)
		want    []string
		wantNot []string
	}{
		{name: "ADD ok", observe: func(m *Metrics) { m.Call("ADD", 20*time.Millisecond, nil) },
			want:    []string{`rdmanet_meta_call_duration_seconds_count{command="ADD",result="ok"} 1`, `rdmanet_meta_call_duration_seconds_bucket{command="ADD",result="ok",le="0.025"} 1`},
			wantNot: []string{`rdmanet_meta_call_errors_total`}},
		{name: "DEL busy", observe: func(m *Metrics) { m.Call("DEL", time.Millisecond, busy) },
			want: []string{`rdmanet_meta_call_duration_seconds_count{command="DEL",result="error"} 1`, `rdmanet_meta_call_errors_total{command="DEL",reason="busy"} 1`}},
		{name: "unknown verb is bounded", observe: func(m *Metrics) { m.Call("FROB", time.Millisecond, errors.New("x")) },
			want: []string{`rdmanet_meta_call_errors_total{command="other",reason="other"} 1`}},
		{name: "steps", observe: func(m *Metrics) { m.Step(meta.StepResolve, time.Millisecond); m.Step(meta.StepDelegates, time.Second) },
			want: []string{`rdmanet_meta_add_step_duration_seconds_count{step="resolve"} 1`, `rdmanet_meta_add_step_duration_seconds_count{step="delegates"} 1`}},
		{name: "delegates", observe: func(m *Metrics) {
			m.Delegate("ADD", "sriov", false, 5*time.Millisecond, nil)
			m.Delegate("ADD", "bridge", true, 5*time.Millisecond, nil)
			m.Delegate("DEL", "sriov", false, 5*time.Millisecond, errors.New("x"))
		}, want: []string{
			`rdmanet_meta_delegate_duration_seconds_count{command="ADD",network="attachment",result="ok",type="sriov"} 1`,
			`rdmanet_meta_delegate_duration_seconds_count{command="ADD",network="default",result="ok",type="bridge"} 1`,
			`rdmanet_meta_delegate_duration_seconds_count{command="DEL",network="attachment",result="error",type="sriov"} 1`,
		}},
		{name: "plugin exec in-process and exec'd", observe: func(m *Metrics) {
			m.PluginExec("sriov", "ADD", "in_process", time.Millisecond, nil)
			m.PluginExec("sriov", "ADD", "in_process", time.Millisecond, nil)
			m.PluginExec("macvlan", "ADD", "process", 20*time.Millisecond, nil)
		}, want: []string{
			`rdmanet_plugin_exec_duration_seconds_count{command="ADD",mode="in_process",plugin="sriov",result="ok"} 2`,
			`rdmanet_plugin_exec_duration_seconds_count{command="ADD",mode="process",plugin="macvlan",result="ok"} 1`,
		}},
		{name: "status writes and retries", observe: func(m *Metrics) {
			m.StatusWrite(meta.StatusWritten, 1)
			m.StatusWrite(meta.StatusWritten, 3)
			m.StatusWrite(meta.StatusGaveUp, 4)
		}, want: []string{
			`rdmanet_meta_status_writes_total{result="written"} 2`,
			`rdmanet_meta_status_writes_total{result="gave_up"} 1`,
			`rdmanet_meta_status_write_retries_total 5`,
		}},
		{name: "DEL attempts, pending, released, panics", observe: func(m *Metrics) {
			m.DelAttempt(meta.DelAttempt{Phase: meta.PhaseRetry, Err: errors.New("x")})
			m.PendingRecords(2)
			m.Released("c1")
			m.Panic("rdmanet daemon: DEL retry")
			m.Panic("rdmanet daemon: ADD container c1")
		}, want: []string{
			`rdmanet_meta_delegate_del_attempts_total{phase="retry",result="error"} 1`,
			`rdmanet_meta_pending_dels 2`,
			`rdmanet_meta_pending_dels_released_total 1`,
			`rdmanet_meta_panics_recovered_total{where="retry"} 1`,
			`rdmanet_meta_panics_recovered_total{where="call"} 1`,
		}},
		{name: "forwarded plugin call", observe: func(m *Metrics) { m.PluginCall("rdmanet-ipam", "ADD", "daemon", "ok", time.Millisecond) },
			want: []string{`rdmanet_plugin_call_duration_seconds_count{command="ADD",path="daemon",plugin="rdmanet-ipam",result="ok"} 1`}},
		{name: "pending status writes and readiness read at scrape", observe: func(m *Metrics) {
			m.PendingStatusWrites(func() int { return 3 })
			m.Ready(func() bool { return false })
		}, want: []string{`rdmanet_meta_status_writes_pending 3`, `rdmanet_daemon_ready 0`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New()
			tt.observe(m)
			p := page(t, m)
			for _, w := range tt.want {
				if !strings.Contains(p, w+"\n") {
					t.Errorf("metrics lack %s:\n%s", w, grep(p, "rdmanet_"))
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(p, w+"{") {
					t.Errorf("metrics have %s:\n%s", w, grep(p, w))
				}
			}
		})
	}
}

// TestLabelsBounded: plugin file names and delegate types come from node
// files and NADs; past MaxLabelValues distinct values they are "other".
func TestLabelsBounded(t *testing.T) {
	m := New()
	for i := 0; i < MaxLabelValues+10; i++ {
		m.Delegate("ADD", fmt.Sprintf("t%d", i), false, time.Millisecond, nil)
		m.PluginExec(fmt.Sprintf("p%d", i), "ADD", "process", time.Millisecond, nil)
	}
	m.Delegate("ADD", "t0", false, time.Millisecond, nil) // a known value stays itself
	m.Delegate("ADD", "", false, time.Millisecond, nil)
	p := page(t, m)
	tests := []struct {
		name, want string
	}{
		{name: "first values kept", want: `rdmanet_meta_delegate_duration_seconds_count{command="ADD",network="attachment",result="ok",type="t0"} 2`},
		{name: "later delegate types are other", want: `rdmanet_meta_delegate_duration_seconds_count{command="ADD",network="attachment",result="ok",type="other"} 10`},
		{name: "later plugin names are other", want: `rdmanet_plugin_exec_duration_seconds_count{command="ADD",mode="process",plugin="other",result="ok"} 10`},
		{name: "empty is unknown", want: `rdmanet_meta_delegate_duration_seconds_count{command="ADD",network="attachment",result="ok",type="unknown"} 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(p, tt.want+"\n") {
				t.Fatalf("metrics lack %s", tt.want)
			}
		})
	}
	if n := strings.Count(p, "rdmanet_meta_delegate_duration_seconds_count{"); n != MaxLabelValues+2 {
		t.Fatalf("%d delegate series, want %d", n, MaxLabelValues+2)
	}
}

func TestIPAMUsage(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	block := func(name, cidr string, allocs string) string {
		return fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"network":"rdma","range":"10.60.0.0/16","cidr":%q,"node":"n1","allocations":{%s}}}`, name, cidr, allocs)
	}
	write("aaaa-s.blocks.json", `{"node":"n1","blocks":[`+block("b1", "10.60.0.0/26", `"10.60.0.1":{"reserved":"gateway"},"10.60.0.2":{"containerID":"c1","ifName":"net1"}`)+`,`+
		block("b2", "10.60.0.64/26", `"10.60.0.65":{"containerID":"c2","ifName":"net1"}`)+`]}`)
	// a second range overlapping the first holds b2 in its cache too: counted once
	write("bbbb-s.blocks.json", `{"node":"n1","blocks":[`+block("b2", "10.60.0.64/26", `"10.60.0.65":{"containerID":"c2","ifName":"net1"}`)+`]}`)
	write("cccc-s.blocks.json", `{not json`)
	write("other.json", `{}`)
	m := New()
	m.IPAMUsage(dir)
	p := page(t, m)
	for _, want := range []string{
		`rdmanet_ipam_blocks{network="rdma",range="10.60.0.0/16"} 2`,
		`rdmanet_ipam_block_addresses{network="rdma",range="10.60.0.0/16"} 128`,
		`rdmanet_ipam_allocated_addresses{network="rdma",range="10.60.0.0/16"} 2`,
		`rdmanet_ipam_reserved_addresses{network="rdma",range="10.60.0.0/16"} 1`,
		`rdmanet_ipam_usage_read_errors 1`,
	} {
		if !strings.Contains(p, want+"\n") {
			t.Errorf("metrics lack %s:\n%s", want, grep(p, "rdmanet_ipam"))
		}
	}
	m2 := New()
	m2.IPAMUsage(filepath.Join(dir, "missing"))
	if p := page(t, m2); !strings.Contains(p, "rdmanet_ipam_usage_read_errors 0\n") || strings.Contains(p, "rdmanet_ipam_blocks{") {
		t.Fatalf("a missing state dir: %s", grep(p, "rdmanet_ipam"))
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestCallLimiter: the limiter's calls in flight, refusals and limits are
// on the page.
func TestCallLimiter(t *testing.T) {
	l, err := sockserve.NewLimiter(sockserve.Limits{MaxInFlight: 2, DelReserve: 1, MaxQueued: 0}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := New()
	m.CallLimiter(l)
	ctx := context.Background()
	relAdd, _, err := l.Admit(ctx, sockserve.Call{Command: "ADD", ContainerID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer relAdd()
	relDel, _, err := l.Admit(ctx, sockserve.Call{Command: "DEL", ContainerID: "d"})
	if err != nil {
		t.Fatal(err)
	}
	defer relDel()
	if _, _, err := l.Admit(ctx, sockserve.Call{Command: "ADD", ContainerID: "b"}); !sockserve.IsRejected(err) {
		t.Fatalf("third call: %v, want refused", err)
	}
	p := page(t, m)
	for _, want := range []string{
		`rdmanet_daemon_calls_inflight{class="add"} 1`,
		`rdmanet_daemon_calls_inflight{class="del"} 1`,
		`rdmanet_daemon_calls_queued{class="add"} 0`,
		`rdmanet_daemon_calls_rejected_total{class="add",reason="queue_full"} 1`,
		`rdmanet_daemon_calls_rejected_total{class="del",reason="wait"} 0`,
		`rdmanet_daemon_calls_limit{limit="inflight"} 2`,
		`rdmanet_daemon_calls_limit{limit="del_reserved"} 1`,
	} {
		if !strings.Contains(p, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}
