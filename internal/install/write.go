package install

// Install's writes: the directories, each planned file (atomically, skipped
// when already identical) and the temporary files an interrupted run left.

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rdmanet/rdmanet/internal/fsutil"
)

func (o *Options) prepareDirs() error {
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{o.CNIBinDir, 0o755}, {o.CNIConfDir, 0o755}, {filepath.Join(o.CNIConfDir, MetaDir), 0o700}, {filepath.Join(o.CNIConfDir, IPAMDir), 0o700}} {
		if err := os.MkdirAll(d.path, d.mode); err != nil {
			return fmt.Errorf("create %s: %w; fix: mount the host directory read-write", d.path, err)
		}
		if d.mode == 0o700 {
			if err := os.Chmod(d.path, d.mode); err != nil {
				return fmt.Errorf("chmod %s: %w", d.path, err)
			}
		}
	}
	return nil
}

// put writes one planned file unless it is already there, byte for byte,
// with its mode.
func (o *Options) put(p planned) (Action, error) {
	start := time.Now()
	dest := o.abs(p.entry)
	did := "installed"
	if st, err := os.Lstat(dest); err == nil {
		did = "updated"
		if st.Mode().IsRegular() && st.Mode().Perm() == p.mode {
			if sum, err := hashFile(dest); err == nil && sum == p.entry.SHA256 {
				o.log().Info("unchanged", "file", dest)
				return Action{Path: dest, Did: "unchanged"}, nil
			}
		}
	}
	b, err := p.read()
	if err != nil {
		return Action{}, fmt.Errorf("read %s: %w; nothing was written to %s (it keeps its previous content, if any); fix: the source and rerun", p.src, err, dest)
	}
	if hashBytes(b) != p.entry.SHA256 {
		return Action{}, fmt.Errorf("%s changed while installing (checksum differs from the one taken at the start); nothing was written to %s; rerun", p.src, dest)
	}
	if err := fsutil.WriteFileAtomic(dest, b, p.mode); err != nil {
		return Action{}, fmt.Errorf("install %s: %w; fix: the directory must be writable by this container (hostPath mount read-write)", dest, err)
	}
	o.log().Info(did, "file", dest, "from", p.src, "bytes", len(b), "mode", fmt.Sprintf("%04o", p.mode), "took", time.Since(start).Round(time.Microsecond))
	return Action{Path: dest, Did: did}, nil
}

// sweepTemps removes temporary files an interrupted earlier run left next to
// the files this one writes: fsutil's ".<name>.tmp*" and install.sh's
// "<name>.rdmanet-tmp". They never carry a file's real name, so nothing
// reads them, but they take space.
func (o *Options) sweepTemps(plan []planned, old *Manifest) {
	seen := map[string]bool{}
	var entries []Entry
	for _, p := range plan {
		entries = append(entries, p.entry)
	}
	if old != nil {
		entries = append(entries, old.Files...)
	}
	entries = append(entries, Entry{Root: rootConf, Path: MetaDir + "/" + ManifestName})
	for _, e := range entries {
		dest := o.abs(e)
		if seen[dest] {
			continue
		}
		seen[dest] = true
		matches := append(fsutil.TempFiles(dest), dest+legacyTmpTail)
		for _, m := range matches {
			if st, err := os.Lstat(m); err == nil && st.Mode().IsRegular() {
				if err := os.Remove(m); err == nil {
					o.log().Info("removed a temporary file an interrupted install left", "file", m)
				}
			}
		}
	}
}
