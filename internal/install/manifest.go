package install

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"

	"github.com/rdmanet/rdmanet/internal/fsutil"
)

// Manifest is the install stamp: which rdmanet version installed which
// files, so a later install never clobbers a newer one and Uninstall removes
// exactly these files. It lives at <conf>/rdmanet.d/install.json (inside
// rdmanet's own 0700 directory, which the runtime does not read as config).
type Manifest struct {
	Version   string   `json:"version"`
	Installer string   `json:"installer,omitempty"`
	Time      string   `json:"time,omitempty"`
	Files     []Entry  `json:"files"`
	Dirs      []string `json:"dirs,omitempty"` // under the conf root, removed by Uninstall when empty
}

// Entry is one installed file, relative to its root.
type Entry struct {
	Root string `json:"root"` // "bin" (CNI bin dir) or "conf" (CNI config dir)
	Path string `json:"path"` // slash-separated, relative to the root
	Kind string `json:"kind"` // binary, config, secret, token
	// SHA256 of the content rdmanet wrote. While an install is under way
	// Also holds the previous content's, so either counts as rdmanet's.
	SHA256 string   `json:"sha256"`
	Also   []string `json:"also,omitempty"`
}

const (
	rootBin  = "bin"
	rootConf = "conf"

	kindBinary = "binary"
	kindConfig = "config"
	kindSecret = "secret"
	// kindToken is the node's host token file: rdmanet-agent rewrites it
	// at every rotation, so its content is rdmanet's whatever its checksum.
	kindToken = "token"
)

func (e Entry) same(f Entry) bool { return e.Root == f.Root && e.Path == f.Path }

func (e Entry) owns(sum string) bool { return sum == e.SHA256 || slices.Contains(e.Also, sum) }

func (m *Manifest) has(e Entry) bool {
	return slices.ContainsFunc(m.Files, e.same)
}

// pending is the manifest written before any file: every file of next
// (accepting its old content too) and every file of old not in next, so
// whatever point an interrupted install reached, Uninstall still knows
// every file as rdmanet's.
func pending(old, next *Manifest) *Manifest {
	p := *next
	p.Files = nil
	var prev []Entry
	if old != nil {
		prev = old.Files
	}
	for _, e := range next.Files {
		if i := slices.IndexFunc(prev, e.same); i >= 0 {
			e.Also = append(append([]string{}, prev[i].SHA256), prev[i].Also...)
		}
		p.Files = append(p.Files, e)
	}
	for _, e := range prev {
		if !next.has(e) {
			p.Files = append(p.Files, e)
		}
	}
	return &p
}

// readManifest returns nil without error when there is none.
func readManifest(path string) (*Manifest, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("install manifest %s: %w", path, err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("install manifest %s: %w; fix: it is rdmanet's record of what it installed: restore it, or remove it to treat this node as a fresh install (then --uninstall no longer knows the files)", path, err)
	}
	for _, e := range m.Files {
		if (e.Root != rootBin && e.Root != rootConf) || e.Path == "" || !fs.ValidPath(e.Path) {
			return nil, fmt.Errorf("install manifest %s: entry %+v: root must be bin or conf and path a relative path; fix: restore or remove the file", path, e)
		}
	}
	return &m, nil
}

func writeManifest(path string, m *Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("install manifest: %w", err)
	}
	return nil
}
