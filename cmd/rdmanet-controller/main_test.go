package main

import "testing"

// TestRun checks the exit codes of the command lines that end before the
// controller starts (no API server needed).
func TestRun(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want int
	}{
		{name: "help", args: []string{"--help"}, want: 0},
		{name: "version", args: []string{"--version"}, want: 0},
		{name: "unknown flag", args: []string{"--nope"}, want: 2},
		{name: "invalid value", args: []string{"--log-format=xml"}, want: 2},
		{name: "positional argument", args: []string{"start"}, want: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := run(tc.args); got != tc.want {
				t.Errorf("run(%q) = %d, want %d", tc.args, got, tc.want)
			}
		})
	}
}
