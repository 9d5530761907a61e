package chart

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// kustomization is the part of kustomize's Kustomization and Component
// that deploy/ uses. Decoding is strict: a field deploy/ starts to use that
// Kustomize does not implement fails loudly (extend Kustomize then), rather
// than building something other than `kustomize build` would.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
	Components []string `json:"components"`
	Patches    []struct {
		Target struct {
			Group     string `json:"group"`
			Version   string `json:"version"`
			Kind      string `json:"kind"`
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
			// LabelSelector selects objects by their labels, as kustomize's
			// target labelSelector does (a label selector string).
			LabelSelector string `json:"labelSelector"`
		} `json:"target"`
		Patch string `json:"patch"`
		Path  string `json:"path"`
	} `json:"patches"`
	Images []struct {
		Name    string `json:"name"`
		NewName string `json:"newName"`
		NewTag  string `json:"newTag"`
		Digest  string `json:"digest"`
	} `json:"images"`
}

func readKustomization(dir string) (kustomization, error) {
	p := filepath.Join(dir, "kustomization.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		return kustomization{}, err
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		return k, fmt.Errorf("%s: %w (internal/chart builds the subset of kustomize deploy/ uses: resources, components, JSON patches, images; extend kustomize.go for more)", p, err)
	}
	return k, nil
}

// Kustomize builds the kustomization in dir as `kustomize build` does, as
// an overlay with resources [dir] and the given components would
// (components are directories, e.g. deploy/components/dra). Sources are
// relative to root (e.g. "deploy/node-daemonset.yaml").
func Kustomize(root, dir string, components ...string) ([]Object, error) {
	objs, err := build(root, dir, "Kustomization")
	if err != nil {
		return nil, err
	}
	for _, c := range components {
		if objs, err = applyComponent(root, c, objs); err != nil {
			return nil, err
		}
	}
	return objs, nil
}

func build(root, dir, kind string) ([]Object, error) {
	k, err := readKustomization(dir)
	if err != nil {
		return nil, err
	}
	if k.Kind != kind && !(kind == "Kustomization" && k.Kind == "") {
		return nil, fmt.Errorf("%s/kustomization.yaml: kind %q, want %s", dir, k.Kind, kind)
	}
	objs, err := resources(root, dir, k.Resources)
	if err != nil {
		return nil, err
	}
	for _, c := range k.Components {
		if objs, err = applyComponent(root, filepath.Join(dir, c), objs); err != nil {
			return nil, err
		}
	}
	if err := patch(dir, k, objs); err != nil {
		return nil, err
	}
	for _, img := range k.Images {
		for _, o := range objs {
			setImage(o.Object, img.Name, img.NewName, img.NewTag, img.Digest, false)
		}
	}
	return objs, nil
}

// resources reads the resources a kustomization in dir lists: files of
// objects, and directories built as Kustomizations of their own.
func resources(root, dir string, names []string) ([]Object, error) {
	var objs []Object
	for _, r := range names {
		p := filepath.Join(dir, r)
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("%s/kustomization.yaml: resource %s: %w", dir, r, err)
		}
		if st.IsDir() {
			sub, err := build(root, p, "Kustomization")
			if err != nil {
				return nil, err
			}
			objs = append(objs, sub...)
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(root, p)
		o, err := decodeObjects(filepath.ToSlash(rel), b)
		if err != nil {
			return nil, err
		}
		objs = append(objs, o...)
	}
	return objs, nil
}

// applyComponent adds a kustomize Component's resources to objs and
// applies its patches to all of them.
func applyComponent(root, dir string, objs []Object) ([]Object, error) {
	k, err := readKustomization(dir)
	if err != nil {
		return nil, err
	}
	if k.Kind != "Component" {
		return nil, fmt.Errorf("%s/kustomization.yaml: kind %q, want Component", dir, k.Kind)
	}
	if len(k.Images) > 0 || len(k.Components) > 0 {
		return nil, fmt.Errorf("%s/kustomization.yaml: images or components in a Component: not implemented by internal/chart (extend kustomize.go)", dir)
	}
	added, err := resources(root, dir, k.Resources)
	if err != nil {
		return nil, err
	}
	objs = append(objs, added...)
	if err := patch(dir, k, objs); err != nil {
		return nil, err
	}
	return objs, nil
}

// patch applies k's JSON patches (RFC 6902) to the objects they target.
func patch(dir string, k kustomization, objs []Object) error {
	for i, p := range k.Patches {
		text := p.Patch
		if p.Path != "" {
			b, err := os.ReadFile(filepath.Join(dir, p.Path))
			if err != nil {
				return fmt.Errorf("%s/kustomization.yaml patches[%d]: %w", dir, i, err)
			}
			text = string(b)
		}
		ops, err := yaml.YAMLToJSON([]byte(text))
		if err != nil || !strings.HasPrefix(strings.TrimSpace(string(ops)), "[") {
			return fmt.Errorf("%s/kustomization.yaml patches[%d]: not a JSON patch (a list of operations): internal/chart applies JSON patches only; extend kustomize.go for strategic merge patches", dir, i)
		}
		jp, err := jsonpatch.DecodePatch(ops)
		if err != nil {
			return fmt.Errorf("%s/kustomization.yaml patches[%d]: %w", dir, i, err)
		}
		sel := labels.Everything()
		if p.Target.LabelSelector != "" {
			if sel, err = labels.Parse(p.Target.LabelSelector); err != nil {
				return fmt.Errorf("%s/kustomization.yaml patches[%d] target labelSelector %q: %w", dir, i, p.Target.LabelSelector, err)
			}
		}
		var hit int
		for _, o := range objs {
			t := p.Target
			gvk := o.GroupVersionKind()
			if (t.Kind != "" && t.Kind != gvk.Kind) || (t.Name != "" && t.Name != o.GetName()) ||
				(t.Group != "" && t.Group != gvk.Group) || (t.Version != "" && t.Version != gvk.Version) ||
				(t.Namespace != "" && t.Namespace != o.GetNamespace()) || !sel.Matches(labels.Set(o.GetLabels())) {
				continue
			}
			doc, err := json.Marshal(o.Object)
			if err != nil {
				return err
			}
			out, err := jp.Apply(doc)
			if err != nil {
				return fmt.Errorf("%s/kustomization.yaml patches[%d] on %s: %w", dir, i, o, err)
			}
			m := map[string]any{}
			if err := json.Unmarshal(out, &m); err != nil {
				return err
			}
			o.Object = m
			hit++
		}
		if hit == 0 {
			return fmt.Errorf("%s/kustomization.yaml patches[%d]: target %+v matches no object", dir, i, p.Target)
		}
	}
	return nil
}

// setImage rewrites the image of every container (containers,
// initContainers, ephemeralContainers) named name, as kustomize's images
// transformer does.
func setImage(v any, name, newName, newTag, digest string, inContainers bool) {
	switch x := v.(type) {
	case map[string]any:
		if inContainers {
			if img, ok := x["image"].(string); ok {
				base, _, _ := strings.Cut(img, "@")
				if i := strings.LastIndex(base, ":"); i > strings.LastIndex(base, "/") {
					base = base[:i]
				}
				if base == name {
					n := name
					if newName != "" {
						n = newName
					}
					switch {
					case digest != "":
						n += "@" + digest
					case newTag != "":
						n += ":" + newTag
					default:
						n += strings.TrimPrefix(img, base)
					}
					x["image"] = n
				}
			}
		}
		for k, c := range x {
			setImage(c, name, newName, newTag, digest, k == "containers" || k == "initContainers" || k == "ephemeralContainers")
		}
	case []any:
		for _, c := range x {
			setImage(c, name, newName, newTag, digest, inContainers)
		}
	}
}
