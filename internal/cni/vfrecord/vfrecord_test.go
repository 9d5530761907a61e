package vfrecord

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
)

type testRecord struct {
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifName"`
	DeviceID    string `json:"deviceID"`
}

const (
	vfA = "0000:3b:02.0"
	vfB = "0000:3b:02.1"
)

func testStore(dir string) Store[testRecord] {
	return Store[testRecord]{
		Dir:    dir,
		Plugin: "test",
		Owner:  func(r *testRecord) (string, string) { return r.ContainerID, r.IfName },
	}
}

// put writes a file of the state dir as it is.
func put(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func putRecord(t *testing.T, dir string, r testRecord) {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	put(t, dir, r.DeviceID+".json", string(b))
}

func TestFind(t *testing.T) {
	mine := testRecord{ContainerID: "c1", IfName: "net1", DeviceID: vfA}
	other := testRecord{ContainerID: "c2", IfName: "net1", DeviceID: vfB}
	tests := []struct {
		name        string
		setup       func(t *testing.T, dir string)
		noDir       bool
		deviceID    string
		corruptHint string
		nameCaller  bool
		want        string // DeviceID of the record found; "" for an error
		notExist    bool   // the error wraps os.ErrNotExist
		wantErr     string // text the error has
	}{
		{
			name:     "by deviceID",
			setup:    func(t *testing.T, dir string) { putRecord(t, dir, mine); putRecord(t, dir, other) },
			deviceID: vfA, want: vfA,
		},
		{
			name:     "by deviceID, no record",
			setup:    func(t *testing.T, dir string) { putRecord(t, dir, other) },
			deviceID: vfA, notExist: true,
		},
		{
			name:     "by deviceID, record of another container",
			setup:    func(t *testing.T, dir string) { putRecord(t, dir, other) },
			deviceID: vfB, notExist: true,
			wantErr: "VF " + vfB + " is cached for container c2: ",
		},
		{
			name:     "by deviceID, record of another container, caller named",
			setup:    func(t *testing.T, dir string) { putRecord(t, dir, other) },
			deviceID: vfB, nameCaller: true, notExist: true,
			wantErr: "VF " + vfB + " is cached for container c2, not c1: ",
		},
		{
			name: "by deviceID, another interface of the container",
			setup: func(t *testing.T, dir string) {
				putRecord(t, dir, testRecord{ContainerID: "c1", IfName: "net2", DeviceID: vfA})
			},
			deviceID: vfA, notExist: true,
		},
		{
			name:     "by deviceID, corrupt record",
			setup:    func(t *testing.T, dir string) { put(t, dir, vfA+".json", "{not json") },
			deviceID: vfA,
			wantErr:  vfA + ".json is corrupt: ",
		},
		{
			name:        "by deviceID, corrupt record with the plugin's hint",
			setup:       func(t *testing.T, dir string) { put(t, dir, vfA+".json", "{not json") },
			deviceID:    vfA,
			corruptHint: " (remove it after checking the VF by hand)",
			wantErr:     vfA + ".json is corrupt (remove it after checking the VF by hand): ",
		},
		{
			name:  "by scan",
			setup: func(t *testing.T, dir string) { putRecord(t, dir, other); putRecord(t, dir, mine) },
			want:  vfA,
		},
		{
			name: "by scan, past a corrupt record, temporary files and locks",
			setup: func(t *testing.T, dir string) {
				put(t, dir, vfB+".json", "{not json")
				put(t, dir, "."+vfB+".json.tmp123", `{"containerID":"c1","ifName":"net1","deviceID":"`+vfB+`"}`)
				put(t, dir, vfB+".lock", "")
				putRecord(t, dir, mine)
			},
			want: vfA,
		},
		{
			name:     "by scan, only records of others",
			setup:    func(t *testing.T, dir string) { putRecord(t, dir, other) },
			notExist: true,
			wantErr:  "no test cache for container c1 ifname net1: ",
		},
		{
			name:     "by scan, no state dir",
			noDir:    true,
			notExist: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.noDir {
				dir = filepath.Join(dir, "absent")
			}
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			s := testStore(dir)
			s.CorruptHint, s.NameCaller = tc.corruptHint, tc.nameCaller
			r, err := s.Find(tc.deviceID, "c1", "net1")
			if tc.want != "" {
				if err != nil {
					t.Fatalf("Find: %v", err)
				}
				if r.DeviceID != tc.want || r.ContainerID != "c1" || r.IfName != "net1" {
					t.Fatalf("Find = %+v, want the record of c1/net1 on %s", *r, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Find = %+v, want an error", *r)
			}
			if errors.Is(err, os.ErrNotExist) != tc.notExist {
				t.Fatalf("Find: %v; wraps os.ErrNotExist: %v, want %v", err, !tc.notExist, tc.notExist)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Find: %v, want %q in it", err, tc.wantErr)
			}
			var syntax *json.SyntaxError
			if strings.Contains(tc.wantErr, "corrupt") && !errors.As(err, &syntax) {
				t.Fatalf("Find: %v does not wrap the JSON error", err)
			}
		})
	}
}

func TestWriteRemove(t *testing.T) {
	rec := testRecord{ContainerID: "c1", IfName: "net1", DeviceID: vfA}
	temp := "." + vfA + ".json.tmp4242"
	tests := []struct {
		name       string
		setup      func(t *testing.T, dir string)
		op         func(s Store[testRecord]) error
		wantRecord bool
	}{
		{
			name:       "write clears a cut-short write's temporary file",
			setup:      func(t *testing.T, dir string) { put(t, dir, temp, "{") },
			op:         func(s Store[testRecord]) error { return s.Write(vfA, &rec) },
			wantRecord: true,
		},
		{
			name:       "write replaces the record",
			setup:      func(t *testing.T, dir string) { putRecord(t, dir, testRecord{ContainerID: "old", DeviceID: vfA}) },
			op:         func(s Store[testRecord]) error { return s.Write(vfA, &rec) },
			wantRecord: true,
		},
		{
			name:  "remove clears the record and temporary files",
			setup: func(t *testing.T, dir string) { putRecord(t, dir, rec); put(t, dir, temp, "{") },
			op:    func(s Store[testRecord]) error { return s.Remove(vfA) },
		},
		{
			name:  "remove of a record already gone clears temporary files",
			setup: func(t *testing.T, dir string) { put(t, dir, temp, "{") },
			op:    func(s Store[testRecord]) error { return s.Remove(vfA) },
		},
		{
			name: "remove of nothing is no error",
			op:   func(s Store[testRecord]) error { return s.Remove(vfA) },
		},
		{
			name:  "clear cut short removes temporary files",
			setup: func(t *testing.T, dir string) { put(t, dir, temp, "{") },
			op:    func(s Store[testRecord]) error { return s.ClearCutShort(vfA) },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			s := testStore(dir)
			if err := tc.op(s); err != nil {
				t.Fatal(err)
			}
			r, err := s.Read(vfA)
			switch {
			case tc.wantRecord && err != nil:
				t.Fatalf("Read: %v", err)
			case tc.wantRecord && *r != rec:
				t.Fatalf("Read = %+v, want %+v", *r, rec)
			case !tc.wantRecord && !errors.Is(err, os.ErrNotExist):
				t.Fatalf("Read: %v, want os.ErrNotExist", err)
			}
			ents, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				if e.Name() != vfA+".json" {
					t.Errorf("%s left in the state dir", e.Name())
				}
			}
		})
	}
}

func TestClearCutShortNothingToDo(t *testing.T) {
	tests := []struct {
		name string
		bdf  string
	}{
		{name: "no deviceID"},
		{name: "no temporary file", bdf: vfA},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			if err := testStore(dir).ClearCutShort(tc.bdf); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the state dir was made (a lock taken): %v", err)
			}
		})
	}
}

func TestPaths(t *testing.T) {
	s := testStore("/var/lib/cni/test")
	if got, want := s.Path(vfA), "/var/lib/cni/test/"+vfA+".json"; got != want {
		t.Errorf("Path = %s, want %s", got, want)
	}
	if got, want := s.LockPath(vfA), "/var/lib/cni/test/"+vfA+".lock"; got != want {
		t.Errorf("LockPath = %s, want %s", got, want)
	}
}

// embedded is a record type that embeds Attachment and Call.
type embedded struct {
	Attachment
	RDMADev string `json:"rdmaDev"`
	Call
}

// TestAttachmentRecords: a store of records that embed Attachment needs no
// Owner, finds records by their attachment, names their device, and keeps
// the keys a record of its own fields had.
func TestAttachmentRecords(t *testing.T) {
	s := Store[embedded]{Dir: t.TempDir(), Plugin: "rdma"}
	args := &skel.CmdArgs{ContainerID: "c1", IfName: "net1", Netns: "/var/run/netns/p"}
	r := &embedded{Attachment: AttachmentOf(args, "0000:41:00.2"), RDMADev: "mlx5_4", Call: Call{Stdin: []byte(`{}`), Result: json.RawMessage(`{"cniVersion":"1.0.0"}`)}}
	if err := s.Write("0000:41:00.2", r); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(s.Path("0000:41:00.2"))
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"containerID", "ifName", "netns", "deviceID", "rdmaDev", "stdin", "result"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("record %s lacks key %q", b, k)
		}
	}
	for _, tc := range []struct {
		name, deviceID, containerID string
		wantErr                     bool
	}{
		{name: "named by the config", deviceID: "0000:41:00.2", containerID: "c1"},
		{name: "found by scanning", containerID: "c1"},
		{name: "another container's", deviceID: "0000:41:00.2", containerID: "c2", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Find(tc.deviceID, tc.containerID, "net1")
			if (err != nil) != tc.wantErr {
				t.Fatalf("Find: %v, want error %v", err, tc.wantErr)
			}
			if err == nil && (s.Device(got) != "0000:41:00.2" || got.Netns != "/var/run/netns/p" || string(got.Result) != `{"cniVersion":"1.0.0"}`) {
				t.Fatalf("found %+v (device %q)", got, s.Device(got))
			}
		})
	}
}
