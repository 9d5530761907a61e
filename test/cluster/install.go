package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// OverlayDir is the committed kustomize overlay of deploy/ for the
// simulated node (pool config, the fixture's sysfs, the recording fake).
const OverlayDir = "test/cluster/overlay"

// MultiNodeOverlayDir is OverlayDir plus what the multi-node boards' IB
// PFs need: the IB pools and the GUID pool (deploy/components/infiniband).
const MultiNodeOverlayDir = "test/cluster/overlay-multinode"

// overlayFor is the committed overlay a cluster of these nodes installs.
func overlayFor(nodes []Node) string {
	if len(nodes) > 1 {
		return MultiNodeOverlayDir
	}
	return OverlayDir
}

// overlay writes <state>/overlay: the committed overlay for the cluster's
// nodes with the image tag set (the tag comes from the version the
// binaries report).
func (l Layout) overlay(imageRef string) (string, error) {
	dir := l.path("overlay")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	nodes, err := l.readNodes()
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(dir, filepath.Join(l.Repo, overlayFor(nodes)))
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

// Install applies the overlay and waits for the rdmanet-node DaemonSet,
// the rdmanet-controller Deployment and the controller's CA in every
// webhook of its configurations (until then the API server cannot call
// them, and RDMA pods are refused).
func (l Layout) Install(ctx context.Context, k Kubectl, imageRef string, out io.Writer) error {
	dir, err := l.overlay(imageRef)
	if err != nil {
		return fmt.Errorf("overlay: %w", err)
	}
	if err := k.run(ctx, out, "apply", "-k", dir); err != nil {
		return err
	}
	return l.waitInstalled(ctx, k, out)
}

// waitInstalled waits until rdmanet is up: the node DaemonSet and the
// controller rolled out, the controller's CA in every webhook.
func (l Layout) waitInstalled(ctx context.Context, k Kubectl, out io.Writer) error {
	if err := k.run(ctx, out, "-n", "rdmanet-system", "rollout", "status", "daemonset/rdmanet-node", "--timeout=300s"); err != nil {
		return err
	}
	if err := k.run(ctx, out, "-n", "rdmanet-system", "rollout", "status", "deployment/rdmanet-controller", "--timeout=300s"); err != nil {
		logs, _ := k.Output(ctx, "-n", "rdmanet-system", "logs", "deployment/rdmanet-controller", "--tail=40")
		return fmt.Errorf("%w\nrdmanet-controller's log:\n%s", err, logs)
	}
	return k.WaitCABundles(ctx, ControllerWebhooks, 2*time.Minute)
}

// ControllerWebhooks is the name of rdmanet-controller's Mutating- and
// ValidatingWebhookConfiguration.
const ControllerWebhooks = "rdmanet-controller"

// WaitCABundles waits until every webhook of the mutating and validating
// configuration name has a caBundle.
func (k Kubectl) WaitCABundles(ctx context.Context, name string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for _, kind := range []string{"mutatingwebhookconfiguration", "validatingwebhookconfiguration"} {
		for {
			js, err := k.Output(ctx, "get", kind, name, "-o", "json")
			if err != nil {
				return err
			}
			var cfg struct {
				Webhooks []struct {
					Name         string
					ClientConfig struct{ CABundle string } `json:"clientConfig"`
				}
			}
			if err := json.Unmarshal([]byte(js), &cfg); err != nil {
				return fmt.Errorf("%s %s: %w", kind, name, err)
			}
			var missing []string
			for _, w := range cfg.Webhooks {
				if w.ClientConfig.CABundle == "" {
					missing = append(missing, w.Name)
				}
			}
			if len(missing) == 0 && len(cfg.Webhooks) > 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s %s: webhooks %v have no caBundle %s after rdmanet-controller became ready; its log: kubectl -n rdmanet-system logs deployment/rdmanet-controller", kind, name, missing, limit)
			}
			time.Sleep(time.Second)
		}
	}
	return nil
}

// Uninstall deletes what Install applied and waits for it to go.
func (l Layout) Uninstall(ctx context.Context, k Kubectl, out io.Writer) error {
	dir := l.path("overlay")
	if !fileExists(filepath.Join(dir, "kustomization.yaml")) {
		return nil
	}
	return k.run(ctx, out, "delete", "-k", dir, "--ignore-not-found", "--wait", "--timeout=180s")
}
