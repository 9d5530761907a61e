package verbs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/internal/sysfs"
)

// TestAddRecorded: the ADD of a plugin that keeps a record per device
// holds the device's lock while it runs, keeps what a successful ADD
// recorded, and rolls back one that fails after its record was written.
func TestAddRecorded(t *testing.T) {
	failed := errors.New("move failed")
	stuck := errors.New("VF busy")
	tests := []struct {
		name       string
		begin      bool  // the body writes its record
		bodyErr    error // the body's error after that
		undoErr    error
		wantUndo   bool
		wantRecord bool // the record after the ADD
		wantErr    []string
	}{
		{name: "success: the result recorded", begin: true, wantRecord: true},
		{name: "fails before its record: nothing to undo", bodyErr: failed, wantErr: []string{"move failed"}},
		{name: "fails after its record: undone, record removed", begin: true, bodyErr: failed, wantUndo: true, wantErr: []string{"move failed"}},
		{name: "the undo fails too: the record is kept for DEL", begin: true, bodyErr: failed, undoErr: stuck, wantUndo: true, wantRecord: true,
			wantErr: []string{"move failed; rollback also failed (the record ", " is kept for DEL): VF busy"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			records := testRecords(t)
			args := &skel.CmdArgs{ContainerID: "c1", IfName: "net1", Netns: "/proc/self/ns/net"}
			undone := false
			res, err := AddRecorded(args.Netns, records, testBDF, nil, func(*testRec, ns.NetNS) error { return nil },
				func(at *Attach[testRec]) (types.Result, error) {
					if _, err := os.Stat(records.LockPath(testBDF)); err != nil {
						t.Errorf("the device's lock is not held: %v", err)
					}
					rec := &testRec{ContainerID: "c1", IfName: "net1", DeviceID: testBDF}
					if tc.begin {
						if err := at.Begin(rec, func(hostNS, podNS ns.NetNS) error { undone = true; return tc.undoErr }); err != nil {
							return nil, err
						}
					}
					if tc.bodyErr != nil {
						return &current.Result{}, tc.bodyErr
					}
					result := &current.Result{CNIVersion: "1.0.0"}
					return result, at.Finish("addr", &rec.Result, result, "result")
				})
			if len(tc.wantErr) == 0 && (err != nil || res == nil) {
				t.Fatalf("AddRecorded: %v, %v", res, err)
			}
			for _, w := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) || res != nil {
					t.Fatalf("AddRecorded: %v, %v; want no result and %q in the error", res, err, w)
				}
			}
			if undone != tc.wantUndo {
				t.Errorf("undo ran %v, want %v", undone, tc.wantUndo)
			}
			r, rerr := records.Read(testBDF)
			if (rerr == nil) != tc.wantRecord {
				t.Fatalf("record after the ADD: %v, want it kept %v", rerr, tc.wantRecord)
			}
			if tc.wantRecord && tc.bodyErr == nil && string(r.Result) == "" {
				t.Errorf("the result is not in the record: %+v", r)
			}
			if _, err := os.Stat(records.LockPath(testBDF)); !os.IsNotExist(err) {
				t.Errorf("lock file left behind: %v", err)
			}
		})
	}
}

// pathNS is a netns known by its path only.
type pathNS struct {
	ns.NetNS
	p string
}

func (n pathNS) Path() string { return n.p }

// fakeRDMA places RDMA devices in netns by path.
type fakeRDMA struct{ in map[string]string } // device -> netns path

func (f *fakeRDMA) NetnsMode() (string, error) { return "exclusive", nil }
func (f *fakeRDMA) InNetns(dev string, target ns.NetNS) (bool, error) {
	return f.in[dev] == target.Path(), nil
}
func (f *fakeRDMA) Move(dev string, from, to ns.NetNS) error { f.in[dev] = to.Path(); return nil }

func TestRDMABack(t *testing.T) {
	host, pod := pathNS{p: "host"}, pathNS{p: "pod"}
	tests := []struct {
		name     string
		in       string // where the device is ("" neither)
		podGone  bool
		fnExists bool
		wantIn   string
		wantErr  string
	}{
		{name: "in the pod: moved back", in: "pod", fnExists: true, wantIn: "host"},
		{name: "already home", in: "host", fnExists: true, wantIn: "host"},
		{name: "pod netns gone, the kernel returned it", in: "host", podGone: true, fnExists: true, wantIn: "host"},
		{name: "in neither yet: retry", fnExists: true, wantErr: "RDMA device mlx5_4 of 0000:3b:02.0 is in neither the pod netns /var/run/netns/p nor the host"},
		{name: "in neither and the function is gone: done", podGone: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if tc.fnExists {
				if err := os.MkdirAll(filepath.Join(root, "bus/pci/devices", testBDF), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			r := &fakeRDMA{in: map[string]string{"mlx5_4": tc.in}}
			var podNS ns.NetNS = pod
			if tc.podGone {
				podNS = nil
			}
			err := RDMABack(r, sysfs.New(root), "mlx5_4", testBDF, "/var/run/netns/p", host, podNS)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("RDMABack: %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || r.in["mlx5_4"] != tc.wantIn {
				t.Fatalf("RDMABack: %v, device in %q; want it in %q", err, r.in["mlx5_4"], tc.wantIn)
			}
		})
	}
}

// fakeIPAM records the calls of an IPAM plugin.
type fakeIPAM struct {
	calls []string
	err   error
}

func (f *fakeIPAM) Add(p string, _ []byte) (types.Result, error) {
	f.calls = append(f.calls, "ADD "+p)
	return &current.Result{CNIVersion: "1.0.0"}, f.err
}
func (f *fakeIPAM) Check(p string, _ []byte) error {
	f.calls = append(f.calls, "CHECK "+p)
	return f.err
}
func (f *fakeIPAM) Del(p string, _ []byte) error { f.calls = append(f.calls, "DEL "+p); return f.err }
func (f *fakeIPAM) DelFor(p string, stdin []byte, c, i string) error {
	f.calls = append(f.calls, "DEL "+p+" "+c+"/"+i+" "+string(stdin))
	return f.err
}

func TestIPAMSteps(t *testing.T) {
	exhausted := errors.New("range exhausted")
	hit := errors.New("failpoint ipam")
	tests := []struct {
		name      string
		run       func(i *fakeIPAM) error
		ipamErr   error
		wantCalls []string
		wantErr   string
	}{
		{name: "DEL of no IPAM: nothing", run: func(i *fakeIPAM) error { return DelIPAM(i, "", nil) }},
		{name: "DEL", run: func(i *fakeIPAM) error { return DelIPAM(i, "rdmanet-ipam", nil) }, wantCalls: []string{"DEL rdmanet-ipam"}},
		{name: "DEL's error names the plugin", run: func(i *fakeIPAM) error { return DelIPAM(i, "rdmanet-ipam", nil) }, ipamErr: exhausted,
			wantCalls: []string{"DEL rdmanet-ipam"}, wantErr: `IPAM plugin "rdmanet-ipam" DEL: range exhausted`},
		{name: "CHECK's error names the plugin", run: func(i *fakeIPAM) error { return CheckIPAM(i, "whereabouts", nil) }, ipamErr: exhausted,
			wantCalls: []string{"CHECK whereabouts"}, wantErr: `IPAM plugin "whereabouts" CHECK: range exhausted`},
		{name: "CHECK of no IPAM: nothing", run: func(i *fakeIPAM) error { return CheckIPAM(i, "", nil) }},
		{name: "DEL of a recorded attachment with the call's config", run: func(i *fakeIPAM) error {
			return DelIPAMFor(i, "rdmanet-ipam", []byte("call"), []byte("recorded"), "old", "net1")
		}, wantCalls: []string{"DEL rdmanet-ipam old/net1 call"}},
		{name: "DEL of a recorded attachment without one: the recorded config", run: func(i *fakeIPAM) error {
			return DelIPAMFor(i, "rdmanet-ipam", nil, []byte("recorded"), "old", "net1")
		}, wantCalls: []string{"DEL rdmanet-ipam old/net1 recorded"}},
		{name: "ADD of no IPAM: nothing", run: func(i *fakeIPAM) error { return AddIPAM(i, "", nil, nil, nil, "net1", nil) }},
		{name: "ADD's error names the plugin", run: func(i *fakeIPAM) error { return AddIPAM(i, "rdmanet-ipam", nil, nil, nil, "net1", nil) },
			ipamErr: exhausted, wantCalls: []string{"ADD rdmanet-ipam"}, wantErr: `IPAM plugin "rdmanet-ipam" ADD: range exhausted`},
		{name: "ADD stops at its step between allocation and address", run: func(i *fakeIPAM) error {
			return AddIPAM(i, "rdmanet-ipam", nil, nil, nil, "net1", func() error { i.calls = append(i.calls, "added"); return hit })
		}, wantCalls: []string{"ADD rdmanet-ipam", "added"}, wantErr: "failpoint ipam"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			i := &fakeIPAM{err: tc.ipamErr}
			err := tc.run(i)
			if (err != nil) != (tc.wantErr != "") || (err != nil && err.Error() != tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if strings.Join(i.calls, "|") != strings.Join(tc.wantCalls, "|") {
				t.Fatalf("calls %q, want %q", i.calls, tc.wantCalls)
			}
		})
	}
}

func TestWarn(t *testing.T) {
	Warn(nil, "discarded %d", 1)
	var got string
	Warn(func(f string, a ...any) { got = f }, "kept")
	if got != "kept" {
		t.Fatalf("warning %q, want kept", got)
	}
}
