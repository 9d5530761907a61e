package guidpool_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/guidpool"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name, conf string
		wantErr    string // substring; "" means valid
		wantRanges int
		wantWarn   int
	}{
		{name: "ranges", conf: `{"ranges":[{"start":"02:00:00:00:00:00:00:01","end":"02:00:00:00:00:00:ff:ff"}]}`, wantRanges: 1},
		{name: "ib-kubernetes names and an unknown key", conf: `{"rangeStart":"02:00:00:00:00:00:00:01","rangeEnd":"02:00:00:00:00:00:00:ff","pkeyMode":"x"}`, wantRanges: 1, wantWarn: 1},
		{name: "no range", conf: `{}`, wantErr: `"ranges"`},
		{name: "end below start", conf: `{"ranges":[{"start":"02:00:00:00:00:00:00:09","end":"02:00:00:00:00:00:00:01"}]}`, wantErr: "end is below start"},
		{name: "zero GUID", conf: `{"ranges":[{"start":"00:00:00:00:00:00:00:00","end":"00:00:00:00:00:00:00:01"}]}`, wantErr: "not assignable"},
		{name: "overlap", conf: `{"ranges":[{"start":"02:00:00:00:00:00:00:01","end":"02:00:00:00:00:00:00:10"},{"start":"02:00:00:00:00:00:00:10","end":"02:00:00:00:00:00:00:20"}]}`, wantErr: "overlaps ranges[0]"},
		{name: "bad GUID", conf: `{"ranges":[{"start":"02:00","end":"02:00:00:00:00:00:00:01"}]}`, wantErr: "ranges[0].start"},
		{name: "block size", conf: `{"ranges":[{"start":"02:00:00:00:00:00:00:01","end":"02:00:00:00:00:00:00:10"}],"blockSize":10}`, wantErr: "power of 2"},
		{name: "relative hook", conf: `{"ranges":[{"start":"02:00:00:00:00:00:00:01","end":"02:00:00:00:00:00:00:10"}],"hook":["sm-update"]}`, wantErr: "absolute path"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := guidpool.Parse("/etc/guid-pool.json", []byte(tc.conf))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, guidpool.ErrInvalidConfig) {
					t.Fatalf("err = %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Ranges) != tc.wantRanges || len(c.Warnings) != tc.wantWarn || c.Network != "infiniband-guid/default" {
				t.Errorf("ranges %d warnings %v network %s", len(c.Ranges), c.Warnings, c.Network)
			}
		})
	}
}

func TestGUIDForms(t *testing.T) {
	for _, s := range []string{"c2:11:22:33:44:55:66:77", "c211:2233:4455:6677", "0xc211223344556677", "C2:11:22:33:44:55:66:77"} {
		g, err := guidpool.ParseGUID(s)
		if err != nil || g.String() != "c2:11:22:33:44:55:66:77" {
			t.Errorf("ParseGUID(%q) = %s %v", s, g, err)
		}
		back, ok := guidpool.FromAddr(g.Addr())
		if !ok || back != g {
			t.Errorf("%s → %s → %s %v", g, g.Addr(), back, ok)
		}
	}
	if _, err := guidpool.ParseGUID("66:d8:02:77:aa:aa"); err == nil {
		t.Error("a MAC parsed as a GUID")
	}
}
