package inproc

import (
	"debug/buildinfo"
	"errors"
	"fmt"
	"runtime/debug"
)

// identity is what a binary's Go build info says about the build it came
// from. Two binaries are "the same rdmanet build" when the main module is
// rdmanet, the Go toolchain and the build settings that change code match,
// the dependencies both link have the same versions and sums, and the
// build is stamped with the same VCS revision and modified flag (go build
// in a checkout) or, without VCS stamps, the same non-devel module version.
// An unstamped build ("(devel)", -buildvcs=false) proves nothing and runs
// as a process.
type identity struct {
	bi       *debug.BuildInfo
	settings map[string]string
	deps     map[string]string
}

// settingKeys are the build settings that must match: they change the code
// or the way it runs. (-ldflags carries -X stamps.)
var settingKeys = []string{"-compiler", "-tags", "-ldflags", "-gcflags", "-race", "-msan", "-asan", "-trimpath",
	"CGO_ENABLED", "GOOS", "GOARCH", "GOAMD64", "GOARM64", "GOEXPERIMENT", "GOFIPS140",
	"vcs", "vcs.revision", "vcs.modified", "vcs.time"}

func newIdentity(bi *debug.BuildInfo) identity {
	id := identity{bi: bi, settings: map[string]string{}, deps: map[string]string{}}
	for _, s := range bi.Settings {
		id.settings[s.Key] = s.Value
	}
	for _, d := range bi.Deps {
		id.deps[d.Path] = modString(d)
	}
	return id
}

func modString(m *debug.Module) string {
	s := m.Version + " " + m.Sum
	if m.Replace != nil {
		s += " => " + m.Replace.Path + " " + m.Replace.Version + " " + m.Replace.Sum
	}
	return s
}

func selfIdentity(bi *debug.BuildInfo) (identity, error) {
	if bi == nil {
		var ok bool
		if bi, ok = debug.ReadBuildInfo(); !ok {
			return identity{}, errors.New("this process has no Go build info")
		}
	}
	id := newIdentity(bi)
	if bi.Main.Path != Module {
		return identity{}, fmt.Errorf("this process is built from module %q, not %s", bi.Main.Path, Module)
	}
	if id.stamp() == "" {
		return identity{}, errors.New("this process's build carries no VCS revision or module version (built with -buildvcs=false?), so no plugin file can be proven to be the same build")
	}
	return id, nil
}

// stamp is what identifies the build's own code: the VCS revision (with
// "+modified" for a dirty tree) or the module version; "" when unstamped.
func (id identity) stamp() string {
	if rev := id.settings["vcs.revision"]; rev != "" {
		if id.settings["vcs.modified"] == "true" {
			return "vcs " + rev + "+modified"
		}
		return "vcs " + rev
	}
	if v := id.bi.Main.Version; v != "" && v != "(devel)" {
		return "version " + v
	}
	return ""
}

// cache of build info by file identity (path, size, mtime) lives in Exec.

func readIdentity(path string) (identity, error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return identity{}, fmt.Errorf("no Go build info: %w", err)
	}
	return newIdentity(bi), nil
}

// mismatch returns why the file's build is not self's build of pkg, "" when it is.
func (self identity) mismatch(f identity, pkg string) string {
	switch {
	case f.bi.Main.Path != self.bi.Main.Path:
		return fmt.Sprintf("main module %q, not %s", f.bi.Main.Path, self.bi.Main.Path)
	case f.bi.Path != pkg:
		return fmt.Sprintf("package %q, not %s", f.bi.Path, pkg)
	case f.bi.GoVersion != self.bi.GoVersion:
		return fmt.Sprintf("built with %s, this process with %s", f.bi.GoVersion, self.bi.GoVersion)
	case f.stamp() == "":
		return "the file's build carries no VCS revision or module version"
	case f.stamp() != self.stamp():
		return fmt.Sprintf("another build: %s, this process %s", f.stamp(), self.stamp())
	case f.bi.Main.Version != self.bi.Main.Version || f.bi.Main.Sum != self.bi.Main.Sum:
		return fmt.Sprintf("module version %s, this process %s", f.bi.Main.Version, self.bi.Main.Version)
	}
	for _, k := range settingKeys {
		if f.settings[k] != self.settings[k] {
			return fmt.Sprintf("build setting %s=%q, this process %q", k, f.settings[k], self.settings[k])
		}
	}
	for p, v := range f.deps {
		if sv, ok := self.deps[p]; ok && sv != v {
			return fmt.Sprintf("dependency %s %s, this process %s", p, v, sv)
		}
	}
	return ""
}
