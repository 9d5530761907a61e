package install

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/rdmanet/rdmanet/internal/version/inspect"
)

// Uninstall removes what the install manifest lists — 00-rdmanet.conf
// first, so the runtime stops using rdmanet before its plugins go — each
// file only while it is what rdmanet wrote (same checksum) or, for a
// binary, an rdmanet build of the same command; then the manifest and
// rdmanet's own directories when empty. Anything else stays: another
// project's whereabouts, files someone changed, other files in the
// directories. Without a manifest it removes nothing and says so.
func Uninstall(o Options) (*Report, error) {
	start := time.Now()
	log := o.log()
	mp := o.manifestPath()
	m, err := readManifest(mp)
	if err != nil {
		return nil, err
	}
	rep := &Report{Version: o.Version}
	if m == nil {
		log.Warn("nothing to uninstall: no install manifest (installs before rdmanet 0.2.0 wrote none: remove their files by hand, see docs/deploy.md)", "manifest", mp)
		return rep, nil
	}
	rep.InstalledVersion = m.Version
	log.Info("rdmanet-install: uninstalling", "installed", m.Version, "manifest", mp, "files", len(m.Files))
	files := slices.Clone(m.Files)
	// 00-rdmanet.conf first, then the rest in reverse install order
	slices.Reverse(files)
	slices.SortStableFunc(files, func(a, b Entry) int {
		ra, rb := a.Root == rootConf && a.Path == MetaConf, b.Root == rootConf && b.Path == MetaConf
		switch {
		case ra && !rb:
			return -1
		case rb && !ra:
			return 1
		}
		return 0
	})
	for _, e := range files {
		a := o.remove(e, "uninstall")
		rep.Actions = append(rep.Actions, a)
		if e.Root == rootBin && e.Path == Whereabouts && a.Did == "removed" {
			rep.Whereabouts = "removed"
		}
	}
	if err := os.Remove(mp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return rep, err
	}
	for _, d := range m.Dirs {
		p := filepath.Join(o.CNIConfDir, filepath.FromSlash(d))
		if err := os.Remove(p); err == nil {
			log.Info("removed", "dir", p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			log.Info("left directory (not empty)", "dir", p)
		}
	}
	rep.Took = time.Since(start)
	log.Info("rdmanet-install: uninstalled", "removed", rep.Count("removed"), "left", rep.Count("left"), "already_gone", rep.Count("gone"),
		"took", rep.Took.Round(time.Millisecond))
	return rep, nil
}

// remove deletes one recorded file if it is still rdmanet's.
func (o *Options) remove(e Entry, why string) Action {
	log := o.log()
	p := o.abs(e)
	st, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return Action{Path: p, Did: "gone"}
	}
	if err != nil {
		log.Warn("left: cannot look at it", "file", p, "err", err)
		return Action{Path: p, Did: "left", Reason: err.Error()}
	}
	ours := false
	reason := ""
	if st.Mode().IsRegular() {
		if sum, err := hashFile(p); err == nil && e.owns(sum) {
			ours, reason = true, "as installed"
		}
	}
	if !ours && e.Kind == kindToken && st.Mode().IsRegular() {
		ours, reason = true, "the node token (rewritten at every rotation)"
	}
	if !ours && e.Kind == kindBinary {
		cmd := e.Path
		if cmd == Whereabouts {
			cmd = IPAMBinary
		}
		if b, err := inspect.File(p); err == nil && b.Is(cmd) {
			ours, reason = true, "an rdmanet build of "+cmd
		}
	}
	if !ours {
		log.Warn("left: changed since rdmanet installed it, no longer rdmanet's file", "file", p, "during", why)
		return Action{Path: p, Did: "left", Reason: "changed since installed"}
	}
	if err := os.Remove(p); err != nil {
		log.Warn("left: cannot remove", "file", p, "err", err)
		return Action{Path: p, Did: "left", Reason: err.Error()}
	}
	log.Info("removed", "file", p, "during", why, "because", reason)
	return Action{Path: p, Did: "removed", Reason: reason}
}
