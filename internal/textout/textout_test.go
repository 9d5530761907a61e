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

func TestWriteJSON(t *testing.T) {
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"object indented by two spaces", map[string]any{"a": 1, "b": []string{"x"}}, "{\n  \"a\": 1,\n  \"b\": [\n    \"x\"\n  ]\n}\n"},
		{"html characters kept as they are", struct {
			Fix string `json:"fix"`
		}{"ip link set <dev> up && echo >x"}, "{\n  \"fix\": \"ip link set <dev> up && echo >x\"\n}\n"},
		{"nil slice", []string(nil), "null\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteJSON(&b, tc.v); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Fatalf("got %q, want %q", b.String(), tc.want)
			}
		})
	}
	if err := WriteJSON(&failWriter{}, 1); err == nil {
		t.Fatal("a failed write must return its error")
	}
}
