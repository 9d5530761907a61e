package chart

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
)

// Namespace is the one namespace the chart installs into (rdmanet-controller
// keeps its Lease and certificate Secret there).
const Namespace = "rdmanet-system"

// KubeVersion is the Kubernetes version Render and Lint render for (the
// version of the k8s.io modules rdmanet builds against); `helm install`
// uses the cluster's.
const KubeVersion = "v1.37.0"

// Load loads a chart directory or archive (.tgz) with Helm's loader.
func Load(path string) (*chartv2.Chart, error) {
	c, err := loader.Load(path)
	if err != nil {
		return nil, fmt.Errorf("helm chart %s: %w", path, err)
	}
	return c, nil
}

// Render renders a chart (directory or .tgz) as `helm template
// --include-crds --namespace ns` does, with vals over the chart's values,
// and returns its objects: the CRDs (Source "crds/<file>") and those of
// each template (Source "templates/<file>"), NOTES excluded.
func Render(path, ns string, vals map[string]any) ([]Object, error) {
	c, err := Load(path)
	if err != nil {
		return nil, err
	}
	inst := action.NewInstall(action.NewConfiguration())
	inst.DryRunStrategy = action.DryRunClient
	inst.ReleaseName = "rdmanet"
	inst.Namespace = ns
	inst.Replace = true
	inst.IncludeCRDs = true
	kv, err := common.ParseKubeVersion(KubeVersion)
	if err != nil {
		return nil, err
	}
	inst.KubeVersion = kv
	if vals == nil {
		vals = map[string]any{}
	}
	r, err := inst.Run(c, vals)
	if err != nil {
		return nil, fmt.Errorf("helm template %s: %w", path, err)
	}
	var rel *release.Release
	switch x := r.(type) {
	case *release.Release:
		rel = x
	case release.Release:
		rel = &x
	default:
		return nil, fmt.Errorf("helm template %s: release of type %T", path, r)
	}
	if len(rel.Hooks) > 0 {
		return nil, fmt.Errorf("helm template %s: %d hooks: the chart has none (deploy/ has no equivalent)", path, len(rel.Hooks))
	}
	return splitManifest(c.Name(), rel.Manifest)
}

// splitManifest decodes a rendered manifest: documents separated by
// "---" lines, each starting with Helm's "# Source: <chart>/<path>".
func splitManifest(chartName, manifest string) ([]Object, error) {
	var out []Object
	for _, doc := range strings.Split("\n"+manifest, "\n---") {
		doc = strings.TrimSpace(doc)
		if doc == "" {
			continue
		}
		src := "?"
		if first, _, _ := strings.Cut(doc, "\n"); strings.HasPrefix(first, "# Source: ") {
			src = strings.TrimPrefix(strings.TrimPrefix(first, "# Source: "), chartName+"/")
		}
		objs, err := decodeObjects(filepath.ToSlash(src), []byte(doc))
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	if len(out) == 0 {
		return nil, errors.New("helm template rendered no objects")
	}
	return out, nil
}

// Lint runs `helm lint --strict` on a chart (directory or .tgz) with vals,
// in Namespace: every message of severity warning or above is an error.
func Lint(path string, vals map[string]any) error {
	l := action.NewLint()
	l.Strict = true
	l.Namespace = Namespace
	kv, err := common.ParseKubeVersion(KubeVersion)
	if err != nil {
		return err
	}
	l.KubeVersion = kv
	res := l.Run([]string{path}, vals)
	if len(res.Errors) == 0 {
		return nil
	}
	var msgs []string
	for _, e := range res.Errors {
		msgs = append(msgs, e.Error())
	}
	return fmt.Errorf("helm lint --strict %s:\n  %s", path, strings.Join(msgs, "\n  "))
}
