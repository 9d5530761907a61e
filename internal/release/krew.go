package release

import (
	"fmt"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

// KrewPlugin is krew's plugin manifest (krew.googlecontainertools.github.com/v1alpha2
// Plugin), the fields krew's index uses.
type KrewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec KrewSpec `json:"spec"`
}

type KrewSpec struct {
	Version          string         `json:"version"`
	Homepage         string         `json:"homepage,omitempty"`
	ShortDescription string         `json:"shortDescription"`
	Description      string         `json:"description,omitempty"`
	Caveats          string         `json:"caveats,omitempty"`
	Platforms        []KrewPlatform `json:"platforms"`
}

type KrewPlatform struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	URI    string     `json:"uri"`
	SHA256 string     `json:"sha256"`
	Bin    string     `json:"bin"`
	Files  []KrewFile `json:"files"`
}

type KrewFile struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// KrewArchive is one architecture's plugin archive.
type KrewArchive struct {
	Arch   string
	URI    string
	SHA256 string
}

// KrewManifest is the manifest of the plugin "rdma" (kubectl rdma): one
// platform per archive, each holding kubectl-rdma at its top.
func KrewManifest(version string, archives []KrewArchive) ([]byte, error) {
	var p KrewPlugin
	p.APIVersion, p.Kind = "krew.googlecontainertools.github.com/v1alpha2", "Plugin"
	p.Metadata.Name = "rdma"
	p.Spec = KrewSpec{
		Version:          "v" + strings.TrimPrefix(version, "v"),
		Homepage:         "https://github.com/rdmanet/rdmanet",
		ShortDescription: "Lint, diagnose and render RDMA networking for GPU training pods",
		Description: "kubectl rdma is rdmanet's command line: lint manifests for their RDMA mode (exclusive SR-IOV VF, shared HCA, host network),\n" +
			"doctor a node or pod, read NCCL logs, render manifests for a mode, verify a running job's fabric.",
	}
	for _, a := range archives {
		pl := KrewPlatform{URI: a.URI, SHA256: a.SHA256, Bin: "kubectl-rdma", Files: []KrewFile{{From: "kubectl-rdma", To: "."}}}
		pl.Selector.MatchLabels = map[string]string{"os": "linux", "arch": a.Arch}
		p.Spec.Platforms = append(p.Spec.Platforms, pl)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return yaml.Marshal(p)
}

var (
	krewName   = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	krewSemver = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	sha256Hex  = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// ParseKrewManifest decodes a manifest strictly (unknown fields fail).
func ParseKrewManifest(b []byte) (KrewPlugin, error) {
	var p KrewPlugin
	if err := yaml.UnmarshalStrict(b, &p); err != nil {
		return p, fmt.Errorf("krew manifest: %w", err)
	}
	return p, p.Validate()
}

// Validate checks what krew's index validation checks of a plugin: kind
// and apiVersion, a lowercase name, a semantic version with a leading v, a
// short description, platforms each with a selector, an https URI, a
// sha256, a bin among the files it installs and relative file paths.
func (p KrewPlugin) Validate() error {
	switch {
	case p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin":
		return fmt.Errorf("krew manifest: apiVersion %q kind %q, want krew.googlecontainertools.github.com/v1alpha2 Plugin", p.APIVersion, p.Kind)
	case !krewName.MatchString(p.Metadata.Name):
		return fmt.Errorf("krew manifest: metadata.name %q: lowercase words joined by -", p.Metadata.Name)
	case !krewSemver.MatchString(p.Spec.Version):
		return fmt.Errorf("krew manifest: spec.version %q: want a semantic version with a leading v (v0.2.0)", p.Spec.Version)
	case p.Spec.ShortDescription == "":
		return fmt.Errorf("krew manifest: spec.shortDescription is empty")
	case len(p.Spec.Platforms) == 0:
		return fmt.Errorf("krew manifest: spec.platforms is empty")
	}
	seen := map[string]bool{}
	for i, pl := range p.Spec.Platforms {
		where := fmt.Sprintf("krew manifest: spec.platforms[%d]", i)
		l := pl.Selector.MatchLabels
		key := l["os"] + "/" + l["arch"]
		switch {
		case l["os"] == "" || l["arch"] == "":
			return fmt.Errorf("%s: selector.matchLabels %v: want os and arch", where, l)
		case seen[key]:
			return fmt.Errorf("%s: platform %s twice", where, key)
		case !strings.HasPrefix(pl.URI, "https://"):
			return fmt.Errorf("%s: uri %q: want an https URL", where, pl.URI)
		case !sha256Hex.MatchString(pl.SHA256):
			return fmt.Errorf("%s: sha256 %q: want 64 lowercase hex digits", where, pl.SHA256)
		case pl.Bin == "" || strings.Contains(pl.Bin, "/") && strings.HasPrefix(pl.Bin, "/"):
			return fmt.Errorf("%s: bin %q: want a path relative to the install directory", where, pl.Bin)
		case len(pl.Files) == 0:
			return fmt.Errorf("%s: files is empty", where)
		}
		seen[key] = true
		for _, f := range pl.Files {
			if f.From == "" || f.To == "" || strings.HasPrefix(f.To, "/") || strings.Contains(f.To, "..") {
				return fmt.Errorf("%s: file %+v: want relative from and to", where, f)
			}
		}
	}
	return nil
}
