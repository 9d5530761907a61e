package main

import "testing"

func TestPairedAligned(t *testing.T) {
	tests := []struct {
		name       string
		gpus, nics []string
		want       int
		wantErr    bool
	}{
		{name: "1+1 aligned", gpus: []string{"pci0000:10"}, nics: []string{"pci0000:10"}, want: 1},
		{name: "1+1 misaligned", gpus: []string{"pci0000:10"}, nics: []string{"pci0000:30"}, want: 0},
		{name: "4 pairs each under its root", gpus: []string{"a", "b", "c", "d"}, nics: []string{"a", "b", "c", "d"}, want: 4},
		{name: "pairs crossed: roots match as sets, not as pairs", gpus: []string{"a", "b"}, nics: []string{"b", "a"}, want: 0},
		{name: "unknown devices never align", gpus: []string{"", "a"}, nics: []string{"", "a"}, want: 1},
		{name: "unequal pair lists", gpus: []string{"a"}, nics: []string{"a", "b"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pairedAligned(tt.gpus, tt.nics)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("pairedAligned(%v, %v) = %d, want %d", tt.gpus, tt.nics, got, tt.want)
			}
		})
	}
}

func TestMatchedAligned(t *testing.T) {
	tests := []struct {
		name       string
		gpus, nics []string
		want       int
	}{
		{name: "1+1 aligned", gpus: []string{"a"}, nics: []string{"a"}, want: 1},
		{name: "1+1 misaligned", gpus: []string{"a"}, nics: []string{"b"}, want: 0},
		{name: "crossed sets still pair up", gpus: []string{"a", "b"}, nics: []string{"b", "a"}, want: 2},
		{name: "two NICs under one GPU's root count once", gpus: []string{"a", "b", "c", "d"}, nics: []string{"a", "a", "b", "b"}, want: 2},
		{name: "4 GPUs on a NUMA node, NICs of the other", gpus: []string{"a", "b", "c", "d"}, nics: []string{"e", "e", "f", "f"}, want: 0},
		{name: "unknown roots never align", gpus: []string{""}, nics: []string{""}, want: 0},
		{name: "no devices", want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := matchedAligned(tt.gpus, tt.nics); got != tt.want {
				t.Errorf("matchedAligned(%v, %v) = %d, want %d", tt.gpus, tt.nics, got, tt.want)
			}
		})
	}
}

func TestShareString(t *testing.T) {
	tests := []struct {
		name string
		s    share
		want string
	}{
		{name: "all", s: share{aligned: 64, total: 64}, want: "100.0%"},
		{name: "a third", s: share{aligned: 1, total: 3}, want: "33.3%"},
		{name: "nothing allocated", s: share{}, want: "n/a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.String(); got != tt.want {
				t.Errorf("%+v = %q, want %q", tt.s, got, tt.want)
			}
		})
	}
}
