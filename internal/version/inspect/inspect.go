// Package inspect reads what a binary's Go build info says about it without
// running it: whether it is an rdmanet build, and of which command. The
// installer and `kubectl rdma doctor` use it to tell rdmanet's own files
// from another project's (a Whereabouts binary, say). It is separate from
// package version so that the CNI plugins, which all import version, do not
// link the ELF readers.
package inspect

import (
	"debug/buildinfo"
	"fmt"
	"slices"

	"github.com/rdmanet/rdmanet/internal/version"
)

// Binary is what a file's Go build info says about it.
type Binary struct {
	// Module is the main module ("" when the file has no Go build info).
	Module string
	// Package is the main package's import path.
	Package string
	// ModuleVersion is the main module's version ("(devel)" for a checkout build).
	ModuleVersion string
	// GoVersion is the toolchain that built it.
	GoVersion string
	// Tags are the build tags (-tags).
	Tags string
	// Revision is the VCS revision ("" when unstamped).
	Revision string
	// Deps are the module paths the binary links.
	Deps []string
}

// Links tells whether the binary links the module at path.
func (b Binary) Links(module string) bool { return slices.Contains(b.Deps, module) }

// Rdmanet tells whether the file is built from rdmanet's module.
func (b Binary) Rdmanet() bool { return b.Module == version.Module }

// Is tells whether the file is rdmanet's build of the command cmd
// (e.g. "rdmanet-ipam" for github.com/rdmanet/rdmanet/cmd/rdmanet-ipam).
func (b Binary) Is(cmd string) bool { return b.Rdmanet() && b.Package == version.Module+"/cmd/"+cmd }

// String describes the build for logs: "module/package version".
func (b Binary) String() string {
	if b.Module == "" {
		return "not a Go binary"
	}
	s := b.Package
	if b.ModuleVersion != "" {
		s += " " + b.ModuleVersion
	}
	if b.Revision != "" {
		s += " rev " + b.Revision
	}
	return s
}

// File reads path's Go build info without running it. A file that is
// not a Go binary (a script, a C program) gives an error wrapping the
// reason; callers treat it as "not rdmanet's".
func File(path string) (Binary, error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return Binary{}, fmt.Errorf("read Go build info of %s: %w", path, err)
	}
	s := settings(bi)
	var deps []string
	for _, d := range bi.Deps {
		deps = append(deps, d.Path)
	}
	return Binary{Module: bi.Main.Path, Package: bi.Path, ModuleVersion: bi.Main.Version, GoVersion: bi.GoVersion,
		Tags: s["-tags"], Revision: s["vcs.revision"], Deps: deps}, nil
}

func settings(bi *buildinfo.BuildInfo) map[string]string {
	m := make(map[string]string, len(bi.Settings))
	for _, s := range bi.Settings {
		m[s.Key] = s.Value
	}
	return m
}
