package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// keyNote explains a key the upstream plugins ignore but people write.
var keyNote = map[string]string{
	"kubeletRootDir":         "was a key of the rdma-shared-dev-plugin config on its main branch in 2024-2025 (never in a release; now the --kubelet-root-dir flag); released plugins ignore it and so does rdmanet, which takes the kubelet directory from its own flags",
	"SelectorObj":            "is the SR-IOV device plugin's internal decoded form of \"selectors\" (it shows up in its logs), not a config key; ignored",
	"SelectorObjs":           "is the SR-IOV device plugin's internal decoded form of \"selectors\" (it shows up in its logs), not a config key; ignored",
	"rootDevices":            "is a selector of the SR-IOV device plugin, not of rdma-shared-dev-plugin; ignored, as rdma-shared-dev-plugin ignores it, so the pool selects by the other selectors only",
	"pfNames":                "is a selector of the SR-IOV device plugin, not of rdma-shared-dev-plugin; ignored, as rdma-shared-dev-plugin ignores it, so the pool selects by the other selectors only",
	"devices":                "is not a selector key here (the SR-IOV device plugin's PCI device IDs are \"devices\", rdma-shared-dev-plugin's are \"deviceIDs\"); ignored",
	"isRdma":                 "is a selector of the SR-IOV device plugin; rdma-shared-dev-plugin ignores it (every shared pool is RDMA)",
	"auxTypes":               "selects auxiliary devices and is read only in \"deviceType\": \"auxNetDevice\" pools; ignored here, as upstream ignores it",
	"resourceList":           "is the SR-IOV device plugin's list; it does not belong inside a pool; ignored",
	"configList":             "is rdma-shared-dev-plugin's list; it does not belong inside a pool; ignored",
	"resourcePrefix":         "is a pool key, not a selector; ignored here, as upstream ignores it",
	"resourceName":           "is a pool key, not a selector; ignored here, as upstream ignores it",
	"selectors":              "does not nest; ignored, as upstream ignores it",
	"ifNames":                "is a selector of rdma-shared-dev-plugin, not of the SR-IOV device plugin (use \"pfNames\"); ignored, as upstream ignores it",
	"deviceIDs":              "is a selector of rdma-shared-dev-plugin, not of the SR-IOV device plugin (use \"devices\"); ignored, as upstream ignores it",
	"periodicUpdateInterval": "is a top-level key of rdma-shared-dev-plugin; ignored inside a pool",
}

// checkKeys warns about the keys of a JSON object that encoding/json (and so
// upstream) reads under another spelling, or ignores. known lists the keys in
// their documented spelling. A value that is not an object is left to the
// typed decode to report.
func checkKeys(w *[]Warning, origin, path string, raw []byte, known ...string) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		exact, folded := false, ""
		for _, kn := range known {
			if k == kn {
				exact = true
				break
			}
			if folded == "" && strings.EqualFold(k, kn) {
				folded = kn
			}
		}
		field := strings.TrimPrefix(path+"."+k, ".")
		switch {
		case exact:
		case folded != "":
			*w = append(*w, Warning{Origin: origin, Field: field, Note: fmt.Sprintf("read as %q: keys match case-insensitively, as in upstream's decoder", folded), Fix: fmt.Sprintf("spell it %q", folded)})
		default:
			note := "unknown key, ignored (as upstream's decoder ignores it)"
			for kn, n := range keyNote {
				if strings.EqualFold(k, kn) {
					note = n
				}
			}
			*w = append(*w, Warning{Origin: origin, Field: field, Note: note, Fix: "remove it, or correct its spelling; known keys here: " + strings.Join(known, ", ")})
		}
	}
}

// decodeError turns an encoding/json error into an Error naming the field.
func decodeError(origin, ctx string, err error, rule string) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if ctx != "" {
			field = strings.TrimSuffix(ctx+"."+field, ".")
		}
		return &Error{Origin: origin, Field: field, Value: "a JSON " + typeErr.Value, Rule: rule + "must be a " + goTypeName(typeErr.Type.String()), Fix: "write the value as a " + goTypeName(typeErr.Type.String()), Err: err}
	case errors.As(err, &syntaxErr):
		return &Error{Origin: origin, Field: ctx, Rule: fmt.Sprintf("%snot valid JSON at byte %d: %v", rule, syntaxErr.Offset, err), Fix: "check the JSON syntax (a trailing comma, a missing quote or brace)", Err: err}
	}
	return &Error{Origin: origin, Field: ctx, Rule: rule + err.Error(), Fix: "check the JSON", Err: err}
}

func goTypeName(t string) string {
	switch {
	case t == "string":
		return "string"
	case t == "bool":
		return "boolean (true or false)"
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "*int"):
		return "whole number"
	case strings.HasPrefix(t, "[]"):
		return "list"
	case strings.HasPrefix(t, "map["), strings.HasPrefix(t, "config."), strings.HasPrefix(t, "[]config."):
		return "object"
	}
	return t
}

// quoteList is for messages: ["a", "b"].
func quoteList(in []string) string {
	q := make([]string, len(in))
	for i, s := range in {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// isNull tells whether raw JSON is absent or null.
func isNull(raw []byte) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// plainDecodeError words an encoding/json error without Go type names.
func plainDecodeError(err error) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		if typeErr.Field == "" {
			return &plainError{fmt.Sprintf("a JSON %s where a %s belongs", typeErr.Value, goTypeName(typeErr.Type.String())), err}
		}
		return &plainError{fmt.Sprintf("%s must be a %s, not a JSON %s", typeErr.Field, goTypeName(typeErr.Type.String()), typeErr.Value), err}
	}
	return err
}

// plainError is a decoder error reworded; Unwrap gives the decoder's.
type plainError struct {
	msg string
	err error
}

func (e *plainError) Error() string { return e.msg }
func (e *plainError) Unwrap() error { return e.err }
