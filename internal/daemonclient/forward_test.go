package daemonclient

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
)

// fakeDaemon answers every request on a socket with answer (nil: closes
// the connection without answering, as a daemon killed mid-call) and
// passes the requests it read on the channel.
func fakeDaemon(t *testing.T, answer *PluginResponse) (string, <-chan PluginRequest) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "plugins.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	got := make(chan PluginRequest, 10)
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			var r PluginRequest
			if err := Read(c, &r); err == nil {
				select {
				case got <- r:
				default:
				}
			}
			if answer != nil {
				b, _ := json.Marshal(answer)
				_, _ = c.Write(b)
			}
			c.Close()
		}
	}()
	return sock, got
}

func TestCall(t *testing.T) {
	env := []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c1"}
	tests := []struct {
		name    string
		answer  *PluginResponse
		socket  string // "": a fake daemon; else this path
		cmd     string
		outcome Outcome
		code    uint // CNI error code of an answered error
		stdout  string
	}{
		{name: "result", answer: &PluginResponse{Stdout: []byte(`{"cniVersion":"1.0.0"}`)}, cmd: "ADD", outcome: Answered, stdout: `{"cniVersion":"1.0.0"}`},
		{name: "CNI error", answer: &PluginResponse{Error: types.NewError(types.ErrInvalidNetworkConfig, "bad", "")}, cmd: "ADD", outcome: Answered, code: types.ErrInvalidNetworkConfig},
		{name: "declined", answer: &PluginResponse{Declined: "another build"}, cmd: "ADD", outcome: Local},
		{name: "ADD taken, no answer: try again", cmd: "ADD", outcome: Answered, code: types.ErrTryAgainLater},
		{name: "DEL taken, no answer: repeated here", cmd: "DEL", outcome: Local},
		{name: "CHECK taken, no answer: repeated here", cmd: "CHECK", outcome: Local},
		{name: "no socket", socket: "/nonexistent/plugins.sock", cmd: "ADD", outcome: Local},
		{name: "not a socket", socket: "FILE", cmd: "ADD", outcome: Local},
		{name: "VERSION not forwarded", answer: &PluginResponse{Stdout: []byte("x")}, cmd: "VERSION", outcome: Local},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sock := tc.socket
			switch sock {
			case "":
				sock, _ = fakeDaemon(t, tc.answer)
			case "FILE":
				sock = filepath.Join(t.TempDir(), "plugins.sock")
				if err := os.WriteFile(sock, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			r := Call(sock, "sriov", tc.cmd, []byte(`{}`), env, "go\tgo1\n")
			if r.Outcome != tc.outcome {
				t.Fatalf("outcome %v (%s), want %v", r.Outcome, r.Reason, tc.outcome)
			}
			if r.Outcome == Local && r.Reason == "" {
				t.Errorf("local outcome without a reason")
			}
			if tc.code != 0 && (r.Err == nil || r.Err.Code != tc.code) {
				t.Errorf("error %v, want code %d", r.Err, tc.code)
			}
			if tc.code == 0 && r.Err != nil {
				t.Errorf("unexpected error %v", r.Err)
			}
			if string(r.Stdout) != tc.stdout {
				t.Errorf("stdout %q, want %q", r.Stdout, tc.stdout)
			}
		})
	}
}

// TestCallSendsTheCall: the request carries the plugin, build, stdin and
// environment as given, with the protocol version.
func TestCallSendsTheCall(t *testing.T) {
	sock, reqs := fakeDaemon(t, &PluginResponse{})
	r := Call(sock, "rdmanet-ipam", "DEL", []byte("not json"), []string{"A=1", "CNI_COMMAND=DEL"}, "go\tgo1.26\n")
	if r.Outcome != Answered || r.Err != nil {
		t.Fatalf("%+v", r)
	}
	var q PluginRequest
	select {
	case q = <-reqs:
	case <-time.After(10 * time.Second):
		t.Fatal("the daemon got no request")
	}
	if q.Version != PluginVersion || q.Plugin != "rdmanet-ipam" || string(q.Stdin) != "not json" || q.Build != "go\tgo1.26\n" ||
		!slices.Equal(q.Env, []string{"A=1", "CNI_COMMAND=DEL"}) || q.TimeoutMs != DelTimeout.Milliseconds() {
		t.Errorf("request %+v", q)
	}
}

func TestSocket(t *testing.T) {
	for _, tc := range []struct{ name, env, want string }{
		{name: "default", env: "", want: DefaultSocket},
		{name: "off", env: "off", want: ""},
		{name: "path", env: "/tmp/x.sock", want: "/tmp/x.sock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Socket(func(string) string { return tc.env }); got != tc.want {
				t.Errorf("Socket = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestEnviron(t *testing.T) {
	host := func() (string, error) { return "node-a", nil }
	for _, tc := range []struct {
		name     string
		in       []string
		hostname func() (string, error)
		want     []string
	}{
		{name: "NODENAME set: unchanged", in: []string{"NODENAME=n1"}, hostname: host, want: []string{"NODENAME=n1"}},
		{name: "NODENAME unset: the host name", in: []string{"A=1"}, hostname: host, want: []string{"A=1", "NODENAME=node-a"}},
		{name: "NODENAME empty: the host name", in: []string{"NODENAME="}, hostname: host, want: []string{"NODENAME=", "NODENAME=node-a"}},
		{name: "no host name: unchanged", in: []string{"A=1"}, hostname: func() (string, error) { return "", errors.New("x") }, want: []string{"A=1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Environ(tc.in, tc.hostname); !slices.Equal(got, tc.want) {
				t.Errorf("Environ = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPrint(t *testing.T) {
	var out strings.Builder
	if code := Print(Result{Outcome: Answered, Err: types.NewError(11, "later", "")}, &out); code != 1 || out.String() != `{"code":11,"msg":"later"}`+"\n" {
		t.Errorf("error: exit %d, stdout %q", code, out.String())
	}
	out = strings.Builder{}
	if code := Print(Result{Outcome: Answered, Stdout: []byte("{}")}, &out); code != 0 || out.String() != "{}" {
		t.Errorf("result: exit %d, stdout %q", code, out.String())
	}
}
