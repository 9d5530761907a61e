package textout

import (
	"bytes"
	"errors"
	"testing"
)

type failWriter struct{ n int }

func (f *failWriter) Write(b []byte) (int, error) {
	f.n++
	return 0, errors.New("disk full")
}

func TestPrinter(t *testing.T) {
	tests := []struct {
		name  string
		color bool
		want  string
	}{
		{"plain", false, "x=1 ok\n"},
		{"colour", true, "x=1 " + Green + "ok" + Reset + "\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			p := &Printer{W: &b, Color: tc.color}
			p.Printf("x=%d %s\n", 1, p.C(Green, "ok"))
			if b.String() != tc.want || p.Err != nil {
				t.Fatalf("got %q (%v), want %q", b.String(), p.Err, tc.want)
			}
		})
	}
	fw := &failWriter{}
	p := &Printer{W: fw}
	p.Printf("a")
	p.Printf("b")
	if p.Err == nil || fw.n != 1 {
		t.Fatalf("first error must latch and stop writes: err %v, writes %d", p.Err, fw.n)
	}
}
