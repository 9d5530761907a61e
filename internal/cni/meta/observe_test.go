package meta

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

func TestErrorReason(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{name: "nil", err: nil, want: ""},
		{name: "plain", err: errors.New("boom"), want: ReasonOther},
		{name: "step", err: atStep(ReasonDevice, errors.New("no device")), want: ReasonDevice},
		{name: "step wrapped again", err: fmt.Errorf("ADD: %w", atStep(ReasonPod, errors.New("gone"))), want: ReasonPod},
		{name: "delegate with a CNI error inside", err: atStep(ReasonDelegate, &types.Error{Code: types.ErrInvalidNetworkConfig, Msg: "bad"}), want: ReasonDelegate},
		{name: "lock held", err: types.NewError(types.ErrTryAgainLater, "another CNI call holds container c1", ""), want: ReasonBusy},
		{name: "bad config", err: types.NewError(types.ErrInvalidNetworkConfig, "x", ""), want: ReasonConfig},
		{name: "bad request", err: types.NewError(types.ErrDecodingFailure, "x", ""), want: ReasonConfig},
		{name: "deadline", err: fmt.Errorf("pod: %w", context.DeadlineExceeded), want: ReasonTimeout},
		{name: "deadline beats the step", err: atStep(ReasonPod, fmt.Errorf("get pod: %w", context.DeadlineExceeded)), want: ReasonTimeout},
		{name: "panic", err: &PanicError{Where: "x", Value: "y"}, want: ReasonPanic},
		{name: "step keeps the text", err: atStep(ReasonCache, errors.New("cache dir: read-only file system")), want: ReasonCache},
	}
	known := map[string]bool{"": true}
	for _, r := range Reasons {
		known[r] = true
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ErrorReason(tt.err)
			if got != tt.want {
				t.Fatalf("ErrorReason(%v) = %q, want %q", tt.err, got, tt.want)
			}
			if !known[got] {
				t.Fatalf("%q is not in Reasons", got)
			}
		})
	}
	if e := atStep(ReasonCache, errors.New("cache dir: read-only file system")); e.Error() != "cache dir: read-only file system" {
		t.Fatalf("atStep changed the message: %q", e.Error())
	}
	if atStep(ReasonCache, nil) != nil {
		t.Fatal("atStep(nil) is not nil")
	}
}
