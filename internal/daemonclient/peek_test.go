package daemonclient

import (
	"encoding/json"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

func TestPeekRequest(t *testing.T) {
	encode := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name   string
		body   []byte
		want   Peek
		wantOK bool
	}{
		{name: "shim ADD", body: encode(Request{Version: Version, Command: "ADD", ContainerID: "c1", TimeoutMs: 120000}),
			want: Peek{Command: "ADD", ContainerID: "c1", TimeoutMs: 120000}, wantOK: true},
		{name: "shim GC has no container", body: encode(Request{Version: Version, Command: "GC"}), want: Peek{Command: "GC"}, wantOK: true},
		{name: "plugin DEL from its environment", body: encode(PluginRequest{Version: PluginVersion, Plugin: "sriov",
			Env: []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=old", "CNI_COMMAND=DEL", "CNI_CONTAINERID=c2"}, Stdin: []byte(`{}`), TimeoutMs: 60000}),
			want: Peek{Command: "DEL", ContainerID: "c2", TimeoutMs: 60000}, wantOK: true},
		{name: "keys in another case, as the decoder accepts", body: []byte(`{"COMMAND":"CHECK","containerid":"c3"}`),
			want: Peek{Command: "CHECK", ContainerID: "c3"}, wantOK: true},
		{name: "empty: the readiness probe", body: nil},
		{name: "not JSON", body: []byte("ADD c1")},
		{name: "not an object", body: []byte(`["ADD"]`)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := PeekRequest(tc.body)
			if ok != tc.wantOK || got != tc.want {
				t.Errorf("PeekRequest = %+v, %v; want %+v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// TestWithTimeoutMs: the rewritten request decodes as before with the new
// wait, whatever the case of its key was.
func TestWithTimeoutMs(t *testing.T) {
	tests := []struct {
		name string
		body string
	}{
		{name: "shim request", body: `{"v":1,"command":"ADD","containerID":"c1","config":{"a":1},"timeoutMs":120000}`},
		{name: "no timeout yet", body: `{"v":1,"command":"ADD","containerID":"c1"}`},
		{name: "key in another case", body: `{"v":1,"command":"ADD","containerID":"c1","TimeoutMS":120000}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := WithTimeoutMs([]byte(tc.body), 90000)
			if err != nil {
				t.Fatal(err)
			}
			var r Request
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatal(err)
			}
			if r.TimeoutMs != 90000 || r.Command != "ADD" || r.ContainerID != "c1" {
				t.Errorf("rewritten %s decodes as %+v", b, r)
			}
		})
	}
	if _, err := WithTimeoutMs([]byte("nope"), 1); err == nil {
		t.Error("rewrote a body that is no JSON object")
	}
}

// TestErrorResponse: both sockets' clients read the refusal as a CNI error.
func TestErrorResponse(t *testing.T) {
	b := ErrorResponse(types.NewError(types.ErrTryAgainLater, "busy", "details"))
	var r Response
	var pr PluginResponse
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &pr); err != nil {
		t.Fatal(err)
	}
	for _, e := range []*types.Error{r.Error, pr.Error} {
		if e == nil || e.Code != types.ErrTryAgainLater || e.Msg != "busy" || e.Details != "details" {
			t.Errorf("answer %s read as %+v", b, e)
		}
	}
	if r.Result != nil || pr.Stdout != nil || pr.Declined != "" {
		t.Errorf("answer %s carries more than the error: %+v %+v", b, r, pr)
	}
}
