package cluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// OverlayDir is the committed kustomize overlay of deploy/ for the
// simulated node (pool config, the fixture's sysfs, the recording fake).
const OverlayDir = "test/cluster/overlay"

// overlay writes <state>/overlay: the committed overlay with the image tag
// set (the tag comes from the version the binaries report).
func (l Layout) overlay(imageRef string) (string, error) {
	dir := l.path("overlay")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	rel, err := filepath.Rel(dir, filepath.Join(l.Repo, OverlayDir))
	if err != nil {
		return "", err
	}
	name, tag, ok := strings.Cut(imageRef, ":")
	if !ok {
		return "", fmt.Errorf("image reference %q has no tag", imageRef)
	}
	k := fmt.Sprintf(`# Written by rdmanet-cluster up: the simulated node's overlay with the
# image built for this checkout.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
images:
  - name: rdmanet/rdmanet
    newName: %s
    newTag: %s
`, rel, name, tag)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		return "", err
	}
	return dir, nil
}

// Install applies the overlay and waits for the rdmanet-node DaemonSet.
func (l Layout) Install(ctx context.Context, k Kubectl, imageRef string, out io.Writer) error {
	dir, err := l.overlay(imageRef)
	if err != nil {
		return fmt.Errorf("overlay: %w", err)
	}
	if err := k.run(ctx, out, "apply", "-k", dir); err != nil {
		return err
	}
	return k.run(ctx, out, "-n", "rdmanet-system", "rollout", "status", "daemonset/rdmanet-node", "--timeout=300s")
}

// Uninstall deletes what Install applied and waits for it to go.
func (l Layout) Uninstall(ctx context.Context, k Kubectl, out io.Writer) error {
	dir := l.path("overlay")
	if !fileExists(filepath.Join(dir, "kustomization.yaml")) {
		return nil
	}
	return k.run(ctx, out, "delete", "-k", dir, "--ignore-not-found", "--wait", "--timeout=180s")
}
