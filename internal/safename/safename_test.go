package safename

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name  string
		kind  Kind
		value string
		ok    bool
		why   string // part of the error
	}{
		{name: "containerd sandbox id", kind: ContainerID, value: strings.Repeat("0123456789abcdef", 4), ok: true},
		{name: "container id with _ . -", kind: ContainerID, value: "c0ffee_1.x-2", ok: true},
		{name: "container id at the bound", kind: ContainerID, value: strings.Repeat("a", MaxContainerID), ok: true},
		{name: "container id escaping", kind: ContainerID, value: "../../etc/x", why: "breaks the rule"},
		{name: "container id dot dot", kind: ContainerID, value: "..", why: "breaks the rule"},
		{name: "container id starting with a dot", kind: ContainerID, value: ".hidden", why: "breaks the rule"},
		{name: "container id absolute", kind: ContainerID, value: "/etc/passwd", why: "breaks the rule"},
		{name: "container id with a slash", kind: ContainerID, value: "a/b", why: "breaks the rule"},
		{name: "container id with NUL", kind: ContainerID, value: "abc\x00def", why: "NUL"},
		{name: "container id empty", kind: ContainerID, value: "", why: "empty"},
		{name: "container id too long", kind: ContainerID, value: strings.Repeat("a", MaxContainerID+1), why: "more than 200"},
		{name: "container id with a newline", kind: ContainerID, value: "abc\n", why: "breaks the rule"},
		{name: "container id with a glob", kind: ContainerID, value: "abc*", why: "breaks the rule"},
		{name: "container id unicode", kind: ContainerID, value: "ab\u2215c", why: "breaks the rule"},

		{name: "ifname eth0", kind: IfName, value: "eth0", ok: true},
		{name: "ifname 15 bytes", kind: IfName, value: "enp65s0f0v12345", ok: true},
		{name: "ifname 16 bytes", kind: IfName, value: "enp65s0f0v123456", why: "more than 15"},
		{name: "ifname dot", kind: IfName, value: ".", why: "breaks the rule"},
		{name: "ifname dot dot", kind: IfName, value: "..", why: "breaks the rule"},
		{name: "ifname slash", kind: IfName, value: "../x", why: "breaks the rule"},
		{name: "ifname colon", kind: IfName, value: "eth0:1", why: "breaks the rule"},
		{name: "ifname space", kind: IfName, value: "net 1", why: "breaks the rule"},
		{name: "ifname NUL", kind: IfName, value: "net\x001", why: "NUL"},
		{name: "ifname empty", kind: IfName, value: "", why: "empty"},

		{name: "namespace", kind: PodNamespace, value: "ai-training", ok: true},
		{name: "namespace with a dot", kind: PodNamespace, value: "a.b", why: "breaks the rule"},
		{name: "namespace escaping", kind: PodNamespace, value: "../../etc", why: "breaks the rule"},
		{name: "namespace upper case", kind: PodNamespace, value: "AI", why: "breaks the rule"},
		{name: "namespace too long", kind: PodNamespace, value: strings.Repeat("a", 64), why: "more than 63"},

		{name: "pod name", kind: PodName, value: "face-trainer-0.worker", ok: true},
		{name: "pod name dot dot", kind: PodName, value: "..", why: "breaks the rule"},
		{name: "pod name inner dot dot", kind: PodName, value: "a..b", why: "breaks the rule"},
		{name: "pod name slash", kind: PodName, value: "a/../../b", why: "breaks the rule"},
		{name: "pod name underscore", kind: PodName, value: "a_b", why: "breaks the rule"},
		{name: "pod name too long", kind: PodName, value: strings.Repeat("a", 254), why: "more than 253"},

		{name: "network name", kind: NetworkName, value: "face-training-rdma", ok: true},
		{name: "network name escaping", kind: NetworkName, value: "../net", why: "breaks the rule"},

		{name: "file name", kind: FileName, value: "example.com_sriov-0000:41:00.2-device.json", ok: true},
		{name: "file name dot dot", kind: FileName, value: "..", why: "breaks the rule"},
		{name: "file name slash", kind: FileName, value: "a/b", why: "breaks the rule"},
		{name: "file name NUL", kind: FileName, value: "a\x00", why: "NUL"},
		{name: "file name too long", kind: FileName, value: strings.Repeat("a", 256), why: "more than 255"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.kind, "FIELD", tc.value)
			if tc.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrUnsafe) {
				t.Errorf("error does not wrap ErrUnsafe: %v", err)
			}
			for _, want := range []string{"FIELD", tc.why, "fix:"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			// the value is named (shortened when long)
			if v := tc.value; len(v) < 20 && !strings.Contains(err.Error(), strings.Trim(quote(v), `"`)) {
				t.Errorf("error %q does not name the value %q", err, v)
			}
		})
	}
}

func TestUnknownKind(t *testing.T) {
	if err := Check(Kind(99), "x", "y"); !errors.Is(err, ErrUnsafe) {
		t.Fatalf("unknown kind: %v", err)
	}
}

// FuzzCheck: whatever the value, an accepted one is a single path element
// that stays in its directory, for every rule.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"c1", "../../etc/x", "..", ".", "/", "a/b", "a\x00b", "eth0", "net1:1", "ai-training", "face-trainer-0",
		strings.Repeat("a", 300), "ab\u2215c", " ", "\t", "x.", "-x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		for k := ContainerID; k <= FileName; k++ {
			if Check(k, "f", v) != nil {
				continue
			}
			dir := "/state/dir"
			p := filepath.Join(dir, v+".json")
			if filepath.Dir(p) != dir {
				t.Fatalf("kind %d accepted %q, which leaves %s: %s", k, v, dir, p)
			}
			if v == "." || v == ".." || strings.ContainsAny(v, "/\x00") || len(v) > MaxFileName {
				t.Fatalf("kind %d accepted %q", k, v)
			}
		}
	})
}
