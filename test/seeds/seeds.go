// Package seeds gives tests the seed documents' own manifests from
// examples/seeds, so a test runs the seed's YAML itself, not a copy of it.
package seeds

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	"sigs.k8s.io/yaml"
)

// Dir is examples/seeds of this source tree.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "examples", "seeds")
}

// ExclusiveNAD is the exclusive-mode seed's face-training-rdma NAD.
func ExclusiveNAD() (*nadv1.NetworkAttachmentDefinition, error) {
	path := filepath.Join(Dir(), "exclusive", "nad.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("seed NAD: %w", err)
	}
	var nad nadv1.NetworkAttachmentDefinition
	if err := yaml.UnmarshalStrict(b, &nad); err != nil {
		return nil, fmt.Errorf("seed NAD %s: %w", path, err)
	}
	return &nad, nil
}

// ExclusiveNADConfig is that NAD's spec.config, verbatim; it panics when
// the file is missing or broken (a test tree without its seeds is unusable).
func ExclusiveNADConfig() string {
	nad, err := ExclusiveNAD()
	if err != nil {
		panic(err)
	}
	return nad.Spec.Config
}
