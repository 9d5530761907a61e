// Package safename is the one check for values that come from outside
// rdmanet (the runtime's CNI_CONTAINERID and CNI_IFNAME, CNI_ARGS' pod
// namespace and name, network names) before any of them becomes part of a
// file name: a state cache, a pending-DEL record, a lock, a network-status
// file. A value that passes is a single path element that cannot leave its
// directory ("/", ".", "..", NUL and over-long names are refused), and it
// obeys the rule of the specification that defines it (CNI for container
// IDs, interface and network names; Kubernetes for namespaces and pod names),
// so a real runtime's values always pass.
//
// The package is pure: no syscalls, no dependencies beyond the standard
// library, cheap enough for every call of the hot path.
package safename

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// ErrUnsafe is wrapped by every error of Check.
var ErrUnsafe = errors.New("unsafe name")

// Kind selects the rule a value must follow.
type Kind int

const (
	// ContainerID is CNI_CONTAINERID. CNI spec: non-empty, starts with a
	// letter or digit, then letters, digits, '_', '.' or '-'. rdmanet also
	// bounds it to MaxContainerID bytes, so that "<id>.json" and its
	// temporary file fit a file name (runtimes use 64 hex digits).
	ContainerID Kind = iota
	// IfName is CNI_IFNAME or an interface requested in the networks
	// annotation. CNI spec (and Linux): 1 to 15 bytes, not "." or "..",
	// no '/', ':' or white space.
	IfName
	// PodNamespace is K8S_POD_NAMESPACE: a DNS-1123 label (Kubernetes).
	PodNamespace
	// PodName is K8S_POD_NAME: a DNS-1123 subdomain (Kubernetes).
	PodName
	// NetworkName is a CNI network name (a NAD's config "name"): the CNI
	// spec's rule for network names (the container ID's characters),
	// bounded like a container ID.
	NetworkName
	// FileName is any other single path element: non-empty, at most
	// MaxFileName bytes, not "." or "..", no '/' and no NUL.
	FileName
)

// Bounds of the rules above (bytes).
const (
	MaxContainerID = 200
	MaxIfName      = 15
	MaxNamespace   = 63
	MaxPodName     = 253
	MaxNetworkName = 200
	MaxFileName    = 255
)

var (
	cniName   = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`)
	dnsLabel  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dnsSubdom = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

type rule struct {
	what string // the rule, in words
	max  int
	ok   func(string) bool
}

var rules = map[Kind]rule{
	ContainerID: {what: "the CNI spec allows a container ID of letters, digits, '_', '.' and '-', starting with a letter or digit", max: MaxContainerID,
		ok: cniName.MatchString},
	IfName: {what: "an interface name is 1 to 15 bytes, not \".\" or \"..\", without '/', ':' or white space (CNI spec, Linux)", max: MaxIfName,
		ok: validIfName},
	PodNamespace: {what: "a namespace is a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit", max: MaxNamespace,
		ok: dnsLabel.MatchString},
	PodName: {what: "a pod name is a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', each dot-separated part starting and ending with a letter or digit", max: MaxPodName,
		ok: dnsSubdom.MatchString},
	NetworkName: {what: "the CNI spec allows a network name of letters, digits, '_', '.' and '-', starting with a letter or digit", max: MaxNetworkName,
		ok: cniName.MatchString},
	FileName: {what: "a file name is one path element: not \".\" or \"..\", without '/' or NUL", max: MaxFileName,
		ok: func(v string) bool { return v != "." && v != ".." && !strings.ContainsAny(v, "/\x00") }},
}

func validIfName(v string) bool {
	if v == "." || v == ".." {
		return false
	}
	for _, r := range v {
		if r == '/' || r == ':' || r == 0 || unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

// Check returns nil when value follows kind's rule, else an error wrapping
// ErrUnsafe that names the field, the value (quoted, shortened when long),
// the rule and the fix. field is how the caller's user knows the value,
// e.g. "CNI_CONTAINERID" or "K8S_POD_NAME of CNI_ARGS".
func Check(kind Kind, field, value string) error {
	r, ok := rules[kind]
	if !ok {
		return fmt.Errorf("%w: %s: unknown rule %d", ErrUnsafe, field, kind)
	}
	var why string
	switch {
	case value == "":
		why = "it is empty"
	case len(value) > r.max:
		why = fmt.Sprintf("it is %d bytes long, more than %d", len(value), r.max)
	case strings.ContainsRune(value, 0):
		why = "it contains a NUL byte"
	case !r.ok(value):
		why = "it breaks the rule"
	default:
		return nil
	}
	return fmt.Errorf("%w: %s %s is refused: %s; %s (at most %d bytes); fix: the caller (container runtime, kubelet or manifest) must pass a valid value, rdmanet never turns such a value into a file name",
		ErrUnsafe, field, quote(value), why, r.what, r.max)
}

// quote is %q, shortened to its first 64 bytes for long values.
func quote(v string) string {
	const keep = 64
	if len(v) <= keep {
		return fmt.Sprintf("%q", v)
	}
	return fmt.Sprintf("%q… (%d bytes)", v[:keep], len(v))
}
