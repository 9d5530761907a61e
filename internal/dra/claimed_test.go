package dra

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

// TestClaimed: the registry the device plugin consults: holders by claim,
// release, and the window in which a device-plugin Allocate keeps DRA off
// a device.
func TestClaimed(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		do         func(c *Claimed)
		after      time.Duration // clock advance before the checks
		pci        string
		wantHolder string
		wantRecent bool
	}{
		{name: "free", pci: "0000:41:00.2"},
		{name: "one claim", pci: "0000:41:00.2",
			do:         func(c *Claimed) { c.hold("0000:41:00.2", "u1", "ns/a") },
			wantHolder: "DRA claim ns/a (u1)"},
		{name: "two claims on a shared HCA", pci: "0000:81:00.0",
			do:         func(c *Claimed) { c.hold("0000:81:00.0", "u2", "ns/b"); c.hold("0000:81:00.0", "u1", "ns/a") },
			wantHolder: "DRA claim ns/a (u1), DRA claim ns/b (u2)"},
		{name: "released", pci: "0000:41:00.2",
			do: func(c *Claimed) { c.hold("0000:41:00.2", "u1", "ns/a"); c.release("u1") }},
		{name: "release keeps other claims", pci: "0000:81:00.0",
			do: func(c *Claimed) {
				c.hold("0000:81:00.0", "u1", "ns/a")
				c.hold("0000:81:00.0", "u2", "ns/b")
				c.release("u1")
			},
			wantHolder: "DRA claim ns/b (u2)"},
		{name: "device-plugin Allocate just now", pci: "0000:41:00.2",
			do:         func(c *Claimed) { c.Allocated("example.com/sriov_rdma", []string{"0000:41:00.2"}) },
			after:      RecentAllocation - time.Second,
			wantRecent: true},
		{name: "device-plugin Allocate long ago", pci: "0000:41:00.2",
			do:    func(c *Claimed) { c.Allocated("example.com/sriov_rdma", []string{"0000:41:00.2"}) },
			after: RecentAllocation + time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewClaimed()
			clock := now
			c.now = func() time.Time { return clock }
			if tc.do != nil {
				tc.do(c)
			}
			clock = clock.Add(tc.after)
			if got := c.Holder(tc.pci); got != tc.wantHolder {
				t.Errorf("Holder(%s) = %q, want %q", tc.pci, got, tc.wantHolder)
			}
			res, _, recent := c.recentlyAllocated(tc.pci)
			if recent != tc.wantRecent || (recent && res != "example.com/sriov_rdma") {
				t.Errorf("recentlyAllocated(%s) = %q, %v; want %v", tc.pci, res, recent, tc.wantRecent)
			}
		})
	}
}

// TestHandleError: a recoverable background error is logged; a fatal one
// (the gRPC service failed) goes to Fatal, wrapped.
func TestHandleError(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		wantFatal bool
	}{
		{name: "recoverable", err: fmt.Errorf("publish: %w", kubeletplugin.ErrRecoverable)},
		{name: "fatal", err: errors.New("listener closed"), wantFatal: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var fatal error
			d, err := NewDriver(DriverOptions{NodeName: testNode, StateDir: t.TempDir(), DevicePlugin: &fakeDP{}, Fatal: func(err error) { fatal = err }})
			if err != nil {
				t.Fatal(err)
			}
			d.HandleError(context.Background(), tc.err, "DRA gRPC server failed")
			if (fatal != nil) != tc.wantFatal || (fatal != nil && !errors.Is(fatal, tc.err)) {
				t.Errorf("Fatal got %v, want fatal=%v wrapping %v", fatal, tc.wantFatal, tc.err)
			}
		})
	}
}

// TestObserveEndsRecentHold: a device-plugin Allocate counts as a hold
// until kubelet is seen recording it (PodResources lists the pod); from
// then on PodResources alone says whether the device is held, so a VF whose
// pod is gone can serve a claim at once instead of RecentAllocation later.
func TestObserveEndsRecentHold(t *testing.T) {
	const res, vf = "example.com/sriov_rdma", "0000:41:00.2"
	tests := []struct {
		name     string
		observed []DPHolder
		wantHold bool
	}{
		{name: "not recorded yet: still a hold", observed: nil, wantHold: true},
		{name: "recorded: kubelet accounts for it", observed: []DPHolder{{Resource: res, DeviceID: vf, Pod: "ai/a"}}},
		{name: "another device recorded", observed: []DPHolder{{Resource: res, DeviceID: "0000:41:00.3", Pod: "ai/b"}}, wantHold: true},
		{name: "same ID under another resource", observed: []DPHolder{{Resource: "rdma/other", DeviceID: vf, Pod: "ai/b"}}, wantHold: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewClaimed()
			c.Allocated(res, []string{vf})
			users := ObservingUsers{DevicePluginUsers: fixedUsers(tc.observed), Claimed: c}
			if _, err := users.DevicePluginHolders(context.Background()); err != nil {
				t.Fatal(err)
			}
			if _, _, hold := c.recentlyAllocated(vf); hold != tc.wantHold {
				t.Fatalf("recent hold = %v, want %v", hold, tc.wantHold)
			}
		})
	}
}

type fixedUsers []DPHolder

func (f fixedUsers) DevicePluginHolders(context.Context) ([]DPHolder, error) { return f, nil }
