package daemonclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
)

// TestReadLimit: a message of exactly MaxMessage bytes is read, one byte
// more is refused with ErrTooLarge before it is decoded.
func TestReadLimit(t *testing.T) {
	valid := func(n int) []byte { // a JSON string of n bytes in all
		return []byte(`"` + strings.Repeat("a", n-2) + `"`)
	}
	tests := []struct {
		name    string
		body    []byte
		wantErr error
		anyErr  bool
	}{
		{name: "small", body: []byte(`"x"`)},
		{name: "exactly MaxMessage", body: valid(MaxMessage)},
		{name: "MaxMessage+1", body: valid(MaxMessage + 1), wantErr: ErrTooLarge},
		{name: "far over, not JSON", body: bytes.Repeat([]byte{0xff}, 2*MaxMessage), wantErr: ErrTooLarge},
		{name: "empty", body: nil, anyErr: true},
		{name: "trailing garbage", body: []byte(`"x" "y"`), anyErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s string
			err := Read(bytes.NewReader(tc.body), &s)
			switch {
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error %v, want %v", err, tc.wantErr)
				}
			case tc.anyErr:
				if err == nil {
					t.Fatal("accepted")
				}
			case err != nil:
				t.Fatal(err)
			}
		})
	}
}

// TestAnswerOversize: a client that sends more than MaxMessage still reads
// an answer (the server drains the rest) and the handler sees ErrTooLarge.
func TestAnswerOversize(t *testing.T) {
	lis, err := net.Listen("unix", filepath.Join(t.TempDir(), "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	got := make(chan error, 1)
	go func() {
		srv, err := lis.Accept()
		if err != nil {
			got <- err
			return
		}
		defer srv.Close()
		var req Request
		_ = Answer(srv, 5*time.Second, &req, func(readErr error) any {
			got <- readErr
			return Response{Error: types.NewError(types.ErrDecodingFailure, readErr.Error(), "")}
		})
	}()
	c, err := net.Dial("unix", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cli := c.(*net.UnixConn)
	defer cli.Close()
	if _, err := cli.Write(bytes.Repeat([]byte(" "), MaxMessage+4096)); err != nil {
		t.Fatal(err)
	}
	_ = cli.CloseWrite()
	var resp Response
	_ = cli.SetReadDeadline(time.Now().Add(20 * time.Second))
	if err := json.NewDecoder(cli).Decode(&resp); err != nil {
		t.Fatalf("no answer: %v", err)
	}
	if err := <-got; !errors.Is(err, ErrTooLarge) {
		t.Fatalf("handler saw %v, want ErrTooLarge", err)
	}
	if resp.Error == nil || !strings.Contains(resp.Error.Msg, "larger than") {
		t.Fatalf("answer %+v", resp)
	}
}

// FuzzRead decodes any bytes as each message of the protocol: never a
// panic, never more than MaxMessage read, and what decodes survives a
// round trip unchanged (the daemon and its clients agree on every message).
func FuzzRead(f *testing.F) {
	seeds := []any{
		Request{Version: Version, Command: "ADD", ContainerID: "c1", Netns: "/var/run/netns/p", IfName: "eth0", Args: "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p",
			Path: "/opt/cni/bin", Config: json.RawMessage(`{"cniVersion":"1.0.0","name":"rdmanet","type":"rdmanet"}`), TimeoutMs: 120000},
		Response{Result: json.RawMessage(`{"cniVersion":"1.0.0","ips":[]}`)},
		Response{Error: types.NewError(types.ErrTryAgainLater, "busy", "")},
		PluginRequest{Version: PluginVersion, Plugin: "sriov", Build: "go1.26", Env: []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c1"}, Stdin: []byte(`{}`)},
		PluginResponse{Declined: "other build"},
		PluginResponse{Stdout: []byte(`{"cniVersion":"1.0.0"}`)},
	}
	for _, s := range seeds {
		b, err := json.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{``, `{`, `null`, `[]`, `{"v":1e309}`, `{"config":{"a":`, `{"stdin":"not base64"}`, `{"error":{"code":-1}}`, "\xff\xfe"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, newMsg := range []func() any{
			func() any { return new(Request) }, func() any { return new(Response) },
			func() any { return new(PluginRequest) }, func() any { return new(PluginResponse) },
		} {
			m := newMsg()
			if err := Read(bytes.NewReader(b), m); err != nil {
				if len(b) > MaxMessage && !errors.Is(err, ErrTooLarge) {
					t.Fatalf("%d bytes: %v, want ErrTooLarge", len(b), err)
				}
				continue
			}
			again, err := json.Marshal(m)
			if err != nil {
				t.Fatalf("%T decoded but does not encode: %v", m, err)
			}
			m2 := newMsg()
			if err := Read(bytes.NewReader(again), m2); err != nil {
				t.Fatalf("%T re-encoded does not decode: %v\n%s", m, err, again)
			}
			if !reflect.DeepEqual(normalize(t, m), normalize(t, m2)) {
				t.Fatalf("%T changed in a round trip:\n%s\n%s", m, b, again)
			}
		}
	})
}

// normalize is the message's JSON re-read as generic values, so raw JSON
// fields compare by meaning, not by bytes.
func normalize(t *testing.T, m any) any {
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}
