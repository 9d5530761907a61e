package verbs

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/internal/cni/vfrecord"
)

type testRec struct {
	ContainerID string          `json:"containerID"`
	IfName      string          `json:"ifName"`
	DeviceID    string          `json:"deviceID"`
	Result      json.RawMessage `json:"result,omitempty"`
}

const testBDF = "0000:3b:02.0"

func testRecords(t *testing.T) vfrecord.Store[testRec] {
	return vfrecord.Store[testRec]{Dir: t.TempDir(), Plugin: "test",
		Owner: func(r *testRec) (string, string) { return r.ContainerID, r.IfName }}
}

func TestRecordDel(t *testing.T) {
	undoErr := errors.New("VF still busy")
	unrecErr := errors.New("IPAM DEL failed")
	tests := []struct {
		name           string
		stored         *testRec // the record in the state dir
		deviceID       string   // the config's ("" scans)
		undoErr        error
		unrecordedErr  error
		wantUndo       bool
		wantUnrecorded bool
		wantErr        error
		wantRecord     bool // the record is still there after
	}{
		{name: "named by the config: undone and removed", stored: &testRec{"c1", "net1", testBDF, nil}, deviceID: testBDF, wantUndo: true},
		{name: "found by scanning: undone and removed", stored: &testRec{"c1", "net1", testBDF, nil}, wantUndo: true},
		{name: "no record: Unrecorded runs", wantUnrecorded: true},
		{name: "no record: Unrecorded's error is DEL's", unrecordedErr: unrecErr, wantUnrecorded: true, wantErr: unrecErr},
		{name: "recorded for another attachment: left alone", stored: &testRec{"c2", "net1", testBDF, nil}, deviceID: testBDF,
			wantUnrecorded: true, wantRecord: true},
		{name: "undo fails: the record is kept for the next DEL", stored: &testRec{"c1", "net1", testBDF, nil}, deviceID: testBDF,
			undoErr: undoErr, wantUndo: true, wantErr: undoErr, wantRecord: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			records := testRecords(t)
			if tc.stored != nil {
				if err := records.Write(testBDF, tc.stored); err != nil {
					t.Fatal(err)
				}
			}
			var undone *testRec
			unrecorded := false
			args := &skel.CmdArgs{ContainerID: "c1", IfName: "net1", Netns: "/var/run/netns/rdmanet-test-gone"}
			err := RecordDel[testRec]{
				Records:     records,
				Device:      func(r *testRec) string { return r.DeviceID },
				StrictNetns: true,
				Unrecorded:  func() error { unrecorded = true; return tc.unrecordedErr },
				Undo: func(r *testRec, hostNS, podNS ns.NetNS) error {
					if hostNS == nil || podNS != nil {
						t.Errorf("undo with host netns %v and pod netns %v, want the host's and none (gone)", hostNS, podNS)
					}
					undone = r
					return tc.undoErr
				},
			}.Run(tc.deviceID, args)
			if !errors.Is(err, tc.wantErr) || (err != nil) != (tc.wantErr != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if (undone != nil) != tc.wantUndo || (undone != nil && undone.ContainerID != tc.stored.ContainerID) {
				t.Fatalf("undo ran with %v, want %v (ran: %v)", undone, tc.stored, tc.wantUndo)
			}
			if unrecorded != tc.wantUnrecorded {
				t.Fatalf("Unrecorded ran %v, want %v", unrecorded, tc.wantUnrecorded)
			}
			if _, err := os.Stat(records.Path(testBDF)); (err == nil) != tc.wantRecord {
				t.Fatalf("record after DEL: %v, want it kept %v", err, tc.wantRecord)
			}
			if _, err := os.Stat(records.LockPath(testBDF)); !os.IsNotExist(err) {
				t.Fatalf("lock file left behind: %v", err)
			}
		})
	}
}

func TestCheckRecord(t *testing.T) {
	resultOf := func(r *testRec) json.RawMessage { return r.Result }
	tests := []struct {
		name    string
		stored  *testRec
		result  func(*testRec) json.RawMessage
		wantErr string
		wantIPs int
		stdin   string // the config ("" names testBDF)
	}{
		{name: "record and its result", result: resultOf,
			stored: &testRec{"c1", "net1", testBDF, json.RawMessage(`{"cniVersion":"1.0.0","ips":[{"address":"10.1.2.3/24"}]}`)}, wantIPs: 1},
		{name: "record without a result", result: resultOf, stored: &testRec{"c1", "net1", testBDF, nil}},
		{name: "the plugin records no result", stored: &testRec{"c1", "net1", testBDF, json.RawMessage(`{}`)}},
		{name: "no record: named as the plugin's CHECK", result: resultOf, wantErr: "test CHECK: "},
		{name: "another attachment's record", result: resultOf, stored: &testRec{"c2", "net1", testBDF, nil}, wantErr: "test CHECK: VF 0000:3b:02.0 is cached for container c2"},
		{name: "a config that does not parse: its error", result: resultOf, stored: &testRec{"c1", "net1", testBDF, nil}, stdin: `{`,
			wantErr: "unexpected end of JSON input"},
		{name: "a config that names no device: found by scanning", result: resultOf, stored: &testRec{"c1", "net1", testBDF, nil}, stdin: `{}`},
		{name: "a result that does not read", result: resultOf, stored: &testRec{"c1", "net1", testBDF, json.RawMessage(`{"ips":"x"}`)},
			wantErr: "test CHECK: recorded result: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			records := testRecords(t)
			if tc.stored != nil {
				if err := records.Write(testBDF, tc.stored); err != nil {
					t.Fatal(err)
				}
			}
			stdin := tc.stdin
			if stdin == "" {
				stdin = `{"deviceID":"` + testBDF + `"}`
			}
			args := &skel.CmdArgs{ContainerID: "c1", IfName: "net1", StdinData: []byte(stdin)}
			_, rec, prev, err := CheckRecord(records, parseTestConf, args, tc.result)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("CheckRecord: %v, want %q in it", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("CheckRecord: %v", err)
			}
			if rec.ContainerID != "c1" || len(prev.IPs) != tc.wantIPs {
				t.Fatalf("record %+v with %d addresses in its result, want c1's with %d", rec, len(prev.IPs), tc.wantIPs)
			}
		})
	}
}

// testConf is a config naming the device.
type testConf struct {
	DeviceID string `json:"deviceID"`
}

func (c *testConf) Device() string { return c.DeviceID }

func parseTestConf(stdin []byte) (*testConf, error) {
	c := &testConf{}
	return c, json.Unmarshal(stdin, c)
}
