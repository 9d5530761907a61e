// Package textout is what the reports share (lint, doctor, verify, nccl,
// the demo, ipam gc): the small printer of the human format (write-error
// latching and ANSI colour applied only when the caller says the output is a
// terminal) and the writer of the machine format (WriteJSON).
package textout

import (
	"encoding/json"
	"fmt"
	"io"
)

// ANSI styles.
const (
	Reset  = "\x1b[0m"
	Bold   = "\x1b[1m"
	Dim    = "\x1b[2m"
	Red    = "\x1b[31m"
	Green  = "\x1b[32m"
	Yellow = "\x1b[33m"
	Cyan   = "\x1b[36m"
)

// Printer writes formatted text and remembers the first write error.
type Printer struct {
	W     io.Writer
	Color bool
	Err   error
}

// Printf writes unless an earlier write failed.
func (p *Printer) Printf(format string, args ...any) {
	if p.Err != nil {
		return
	}
	_, p.Err = fmt.Fprintf(p.W, format, args...)
}

// C wraps s in the style code when colour is on.
func (p *Printer) C(code, s string) string {
	if !p.Color {
		return s
	}
	return code + s + Reset
}

// WriteJSON writes v as the machine format of every report: one JSON value,
// indented by two spaces, with <, > and & as they are (messages and fixes
// quote shell commands and manifests), followed by a newline.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
