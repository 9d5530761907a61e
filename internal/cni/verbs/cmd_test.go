package verbs

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/rdmanet/rdmanet/internal/cni/confkeys"
)

type cmdConf struct{ version, name string }

func (c *cmdConf) Header() (string, string) { return c.version, c.name }

// parseCmdConf reads `<version> <name>`; "bad" does not parse.
func parseCmdConf(stdin []byte) (*cmdConf, error) {
	v, n, _ := strings.Cut(string(stdin), " ")
	if v == "bad" {
		return nil, errors.New("does not parse")
	}
	return &cmdConf{v, n}, nil
}

func TestCmdRun(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name     string
		cmd      string
		stdin    string
		addErr   error
		keys     bool // the plugin lists unknown keys
		wantOut  string
		wantErr  string
		wantWarn []string
		wantVerb string
	}{
		{name: "ADD: the result in the config's version, after a warning per unknown key naming the network", cmd: "ADD", stdin: "0.4.0 net-a", keys: true,
			wantOut: `"cniVersion": "0.4.0"`, wantVerb: "add",
			wantWarn: []string{`t config: unknown key "vlan_id" is ignored (did you mean "vlan"?) (network "net-a", container c1); see the doc`}},
		{name: "ADD of a plugin without a key list: no warning", cmd: "ADD", stdin: "1.0.0 net-a", wantOut: `"cniVersion": "1.0.0"`, wantVerb: "add"},
		{name: "ADD that fails: its error, nothing printed", cmd: "ADD", stdin: "1.0.0 net-a", addErr: boom, wantErr: "boom", wantVerb: "add"},
		{name: "ADD of a config that does not parse: warned without a network", cmd: "ADD", stdin: "bad", keys: true, addErr: boom, wantErr: "boom", wantVerb: "add",
			wantWarn: []string{`t config: unknown key "vlan_id" is ignored (did you mean "vlan"?) (network "", container c1); see the doc`}},
		{name: "DEL prints nothing", cmd: "DEL", stdin: "1.0.0 net-a", keys: true, wantVerb: "del"},
		{name: "CHECK prints nothing", cmd: "CHECK", stdin: "1.0.0 net-a", wantVerb: "check"},
		{name: "an unknown command", cmd: "GC", stdin: "1.0.0 net-a", wantErr: "unknown CNI_COMMAND: GC"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var warned []string
			verb := ""
			c := Cmd[*cmdConf, *current.Result]{
				Add: func(*skel.CmdArgs) (*current.Result, error) {
					verb = "add"
					if tc.addErr != nil {
						return nil, tc.addErr
					}
					return &current.Result{CNIVersion: current.ImplementedSpecVersion}, nil
				},
				Del:        func(*skel.CmdArgs) error { verb = "del"; return nil },
				Check:      func(*skel.CmdArgs) error { verb = "check"; return nil },
				ParseLoose: parseCmdConf,
				KeysDoc:    "see the doc",
				Warnf:      func(f string, a ...any) { warned = append(warned, fmt.Sprintf(f, a...)) },
			}
			if tc.keys {
				c.UnknownKeys = func([]byte) []confkeys.Finding {
					return []confkeys.Finding{{Plugin: "t", Key: "vlan_id", Hint: "vlan"}}
				}
			}
			out, err := c.Run(tc.cmd, &skel.CmdArgs{ContainerID: "c1", StdinData: []byte(tc.stdin)})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || out != nil {
					t.Fatalf("Run: %q, %v; want no output and %q", out, err, tc.wantErr)
				}
			} else if err != nil || !strings.Contains(string(out), tc.wantOut) || (tc.wantOut == "") != (len(out) == 0) {
				t.Fatalf("Run: %q, %v; want %q in the output", out, err, tc.wantOut)
			}
			if verb != tc.wantVerb {
				t.Errorf("ran %q, want %q", verb, tc.wantVerb)
			}
			if !slices.Equal(warned, tc.wantWarn) {
				t.Errorf("warnings\n%q\nwant\n%q", warned, tc.wantWarn)
			}
		})
	}
}

type runner struct{ ipam string }

func (r *runner) Run(cmd string, _ *skel.CmdArgs) ([]byte, error) {
	return []byte(cmd + " " + r.ipam), nil
}

func TestRunFromEnv(t *testing.T) {
	built := errors.New("RDMANET_NETOPS refused")
	tests := []struct {
		name     string
		buildErr error
		set      func(*runner)
		want     string
		wantErr  error
	}{
		{name: "built from the call's environment and run", want: "ADD exec"},
		{name: "adjusted before it runs", set: func(r *runner) { r.ipam = Or("delegate", r.ipam) }, want: "ADD delegate"},
		{name: "the build's error", buildErr: built, wantErr: built},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fromEnv := func(getenv func(string) string) (*runner, error) {
				if tc.buildErr != nil {
					return nil, tc.buildErr
				}
				return &runner{ipam: getenv("IPAM")}, nil
			}
			out, err := RunFromEnv(fromEnv, func(k string) string { return map[string]string{"IPAM": "exec"}[k] }, tc.set, "ADD", &skel.CmdArgs{})
			if !errors.Is(err, tc.wantErr) || string(out) != tc.want {
				t.Fatalf("RunFromEnv: %q, %v; want %q, %v", out, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestOr(t *testing.T) {
	var none types.Result
	def := &current.Result{CNIVersion: "1.0.0"}
	if got := Or(none, types.Result(def)); got != def {
		t.Errorf("Or(nil, def) = %v, want def", got)
	}
	given := &current.Result{CNIVersion: "0.4.0"}
	if got := Or(types.Result(given), types.Result(def)); got != given {
		t.Errorf("Or(given, def) = %v, want given", got)
	}
}
