// Package version is the one place every rdmanet binary takes its release
// version from. Version is set at link time from the VERSION file at the
// repository root (the Makefile's LDFLAGS, the image build):
//
//	go build -ldflags "-X github.com/rdmanet/rdmanet/internal/version.Version=$(cat VERSION)" ./cmd/...
//
// Every binary answers `--version` with one line, String's output:
//
//	rdmanet-agent 0.2.0 (rdmanet; go1.26.8 linux/amd64; rev 0123456789ab)
//
// Parse reads that line back (the installer compares versions with it);
// package inspect tells from a file's Go build info, without running it,
// whether the file is an rdmanet build at all.
package version

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"golang.org/x/mod/semver"
)

// Version is the rdmanet release this binary belongs to, without a leading
// "v" (e.g. "0.2.0"); set with -ldflags -X. Use Get, which falls back when
// the build is not stamped.
var Version string

// Module is rdmanet's Go module path.
const Module = "github.com/rdmanet/rdmanet"

// LinkVar is the symbol to stamp: -ldflags "-X <LinkVar>=<version>".
const LinkVar = Module + "/internal/version.Version"

// Unstamped is what Get reports for a build without -X and without a module
// version (go build in a checkout without the Makefile): a pre-release lower
// than every release, so an installer never lets it replace a release
// silently.
const Unstamped = "0.0.0-dev"

// Get returns the version: Version when stamped, else the module version of
// a `go install module@vX.Y.Z` build, else Unstamped.
func Get() string {
	if Version != "" {
		return strings.TrimPrefix(Version, "v")
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Path == Module {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			return strings.TrimPrefix(v, "v")
		}
	}
	return Unstamped
}

// String is the one-line --version answer of program.
func String(program string) string {
	extra := []string{"rdmanet", runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		s := settings(bi)
		if rev := s["vcs.revision"]; rev != "" {
			if len(rev) > 12 {
				rev = rev[:12]
			}
			if s["vcs.modified"] == "true" {
				rev += "+modified"
			}
			extra = append(extra, "rev "+rev)
		}
		if tags := s["-tags"]; tags != "" {
			extra = append(extra, "tags "+tags)
		}
	}
	return fmt.Sprintf("%s %s (%s)", program, Get(), strings.Join(extra, "; "))
}

// Print writes String(program) and a newline to w.
func Print(w io.Writer, program string) { fmt.Fprintln(w, String(program)) }

// FlagSet is what Flag needs of a flag set: *flag.FlagSet (and pflag's)
// has it. An interface, so the CNI plugins that import this package for
// Handle do not link package flag.
type FlagSet interface {
	BoolFunc(name, usage string, fn func(string) error)
}

// Flag adds --version to fs: print String(program) to stdout and exit 0.
func Flag(fs FlagSet, program string) {
	fs.BoolFunc("version", "print the version and exit", func(string) error {
		Print(os.Stdout, program)
		os.Exit(0)
		return nil
	})
}

// Handle prints String(program) and exits 0 when args (os.Args[1:]) is
// exactly "--version", "-version" or "version". For binaries without a flag
// set, such as the CNI plugins: a container runtime never passes arguments
// (it sets CNI_COMMAND), so Handle does nothing when CNI_COMMAND is set.
func Handle(program string, args []string) {
	if len(args) != 1 || os.Getenv("CNI_COMMAND") != "" {
		return
	}
	switch args[0] {
	case "--version", "-version", "version":
		Print(os.Stdout, program)
		os.Exit(0)
	}
}

// Parse reads a --version line back: its program and version. ok is false
// when the line is not one String wrote.
func Parse(line string) (program, version string, ok bool) {
	f := strings.Fields(strings.TrimSpace(line))
	if len(f) < 3 || !strings.HasPrefix(f[2], "(rdmanet") {
		return "", "", false
	}
	return f[0], f[1], Valid(f[1])
}

// Valid tells whether v is a semantic version (with or without "v").
func Valid(v string) bool { return semver.IsValid(canon(v)) }

// Compare compares two versions as semantic versions: -1, 0 or +1. ok is
// false when either is not one (then nothing can be said about their order).
func Compare(a, b string) (c int, ok bool) {
	if !Valid(a) || !Valid(b) {
		return 0, false
	}
	return semver.Compare(canon(a), canon(b)), true
}

func canon(v string) string { return "v" + strings.TrimPrefix(v, "v") }

func settings(bi *debug.BuildInfo) map[string]string {
	m := make(map[string]string, len(bi.Settings))
	for _, s := range bi.Settings {
		m[s.Key] = s.Value
	}
	return m
}
