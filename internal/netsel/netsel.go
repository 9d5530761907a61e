// Package netsel reads the k8s.v1.cni.cncf.io/networks annotation's syntax
// the way Multus reads it, for the meta-CNI (internal/cni/meta) and for lint
// and the webhook (internal/manifest). It has no dependencies, so the CNI
// binary pays nothing for it.
//
// Multus (pkg/k8sclient, parsePodNetworkAnnotation) takes the JSON form when
// the value holds any of '[', '{' or '"', and the short form otherwise: a
// comma-separated list of [<namespace>/]<name>[@<interface>], where each
// part is trimmed of spaces, namespace and name (when not empty) are DNS-1123
// labels, and the interface is at most 15 bytes without spaces or '/'.
package netsel

import (
	"fmt"
	"regexp"
	"strings"
)

// IsJSON tells whether Multus reads the value as the JSON form.
func IsJSON(value string) bool { return strings.ContainsAny(value, `[{"`) }

var dns1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// IsLabel tells whether s is a DNS-1123 label as Multus checks it (Multus
// does not check the 63-character limit; Kubernetes does).
func IsLabel(s string) bool { return dns1123Label.MatchString(s) }

// Short is one element of the short form.
type Short struct {
	Namespace string // "" = the pod's namespace
	Name      string
	Interface string // "" = Multus' default (net1, net2, ... by position)
}

// SyntaxError is an element Multus refuses.
type SyntaxError struct {
	Element string // the element as written
	Multus  string // what Multus says
	Detail  string // what is wrong, for people
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("network %q: %s (Multus refuses it: %q); write [<namespace>/]<name>[@<interface>], e.g. training/sriov-rdma@net1", e.Element, e.Detail, e.Multus)
}

// ParseShort reads one comma-separated element exactly as Multus does.
// An empty name is left for the caller to refuse: Multus takes it and fails
// later, when no NetworkAttachmentDefinition has that name.
func ParseShort(element string) (Short, error) {
	item := strings.TrimSpace(element)
	var s Short
	slash := strings.Split(item, "/")
	rest := item
	switch len(slash) {
	case 1:
	case 2:
		s.Namespace, rest = strings.TrimSpace(slash[0]), slash[1]
	default:
		return s, &SyntaxError{Element: item, Multus: "Invalid network object (failed at '/')", Detail: fmt.Sprintf("has %d '/' where one separates namespace and name", len(slash)-1)}
	}
	at := strings.Split(rest, "@")
	s.Name = strings.TrimSpace(at[0])
	switch len(at) {
	case 1:
	case 2:
		s.Interface = strings.TrimSpace(at[1])
	default:
		return s, &SyntaxError{Element: item, Multus: "Invalid network object (failed at '@')", Detail: fmt.Sprintf("has %d '@' where one separates the interface name", len(at)-1)}
	}
	for _, part := range []struct{ what, v string }{{"namespace", s.Namespace}, {"name", s.Name}} {
		if part.v != "" && !IsLabel(part.v) {
			return s, &SyntaxError{Element: item, Multus: "one or more items did not match comma-delimited format", Detail: fmt.Sprintf("%s %q is not a DNS-1123 label (lower-case letters, digits and '-', starting and ending with a letter or digit; no '.' in the short form — use the JSON form for a name with dots)", part.what, part.v)}
		}
	}
	if s.Interface != "" && (len(s.Interface) > 15 || strings.ContainsAny(s.Interface, " \t\n\v\f\r/")) {
		return s, &SyntaxError{Element: item, Multus: "Failed to parse interface name: must be less than 15 chars and not contain '/' or spaces", Detail: fmt.Sprintf("interface %q is not a Linux interface name (at most 15 bytes, no '/' or spaces)", s.Interface)}
	}
	return s, nil
}
