package plugindaemon

import (
	"regexp"
	"strings"
	"time"
)

// Call is one call the daemon's log says it ran itself (plugind's "plugin
// call served by the daemon" records, ok or failed), for the benchmarks
// that check the daemon served what they sent and read its own time.
type Call struct {
	Plugin, Command, Container string
	Took                       time.Duration
}

// servedLine matches a served call's record (text handler); the attributes
// are read by name, wherever they stand in it.
var servedLine = regexp.MustCompile(`(?m)^.*msg="plugin call served by the daemon.*$`)

// Served lists the calls log (the daemon's output) says it ran.
func Served(log string) []Call {
	var out []Call
	for _, line := range servedLine.FindAllString(log, -1) {
		took, _ := time.ParseDuration(attr(line, "took"))
		out = append(out, Call{Plugin: attr(line, "plugin"), Command: attr(line, "command"), Container: attr(line, "container"), Took: took})
	}
	return out
}

func attr(line, key string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}
