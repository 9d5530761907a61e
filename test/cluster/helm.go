package cluster

// rdmanet installed with its Helm chart instead of the kustomize overlay
// (issue 31): the chart in charts/rdmanet with the simulated node's values
// (overlay/helm-values.yaml), installed through Helm's own install action
// as docs/release.md "Install with Helm" says: the namespace made and
// labelled first, namespace.create=false.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/yaml"
)

// Helm release and chart of the Helm install.
const (
	HelmRelease   = "rdmanet"
	HelmNamespace = "rdmanet-system"
	ChartDir      = "charts/rdmanet"
	// HelmValuesFile is the simulated node's values, next to the overlay.
	HelmValuesFile = OverlayDir + "/helm-values.yaml"
)

// HelmValues are the values the cluster installs the chart with: the
// committed simulated-node values, the image built for this checkout, the
// overlay's pool config (pools.json, verbatim) and namespace.create=false.
func (l Layout) HelmValues(imageRef string) (map[string]any, error) {
	b, err := os.ReadFile(filepath.Join(l.Repo, HelmValuesFile))
	if err != nil {
		return nil, fmt.Errorf("helm values: %w", err)
	}
	vals := map[string]any{}
	if err := yaml.Unmarshal(b, &vals); err != nil {
		return nil, fmt.Errorf("helm values %s: %w", HelmValuesFile, err)
	}
	pools, err := os.ReadFile(filepath.Join(l.Repo, OverlayDir, "pools.json"))
	if err != nil {
		return nil, fmt.Errorf("helm values: pool config: %w", err)
	}
	name, tag, ok := strings.Cut(imageRef, ":")
	if !ok {
		return nil, fmt.Errorf("image reference %q has no tag", imageRef)
	}
	vals["image"] = map[string]any{"repository": name, "tag": tag}
	vals["namespace"] = map[string]any{"create": false}
	node, ok := vals["node"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("helm values %s: no node map", HelmValuesFile)
	}
	agent, _ := node["agent"].(map[string]any)
	if agent == nil {
		agent = map[string]any{}
		node["agent"] = agent
	}
	agent["configJSON"] = string(pools)
	return vals, nil
}

// helmConfig is Helm's action configuration for the cluster's admin
// kubeconfig, releases stored as Secrets in HelmNamespace (Helm's default).
func helmConfig(kubeconfig string, out io.Writer) (*action.Configuration, error) {
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn})))
	flags := genericclioptions.NewConfigFlags(false)
	ns := HelmNamespace
	flags.KubeConfig, flags.Namespace = &kubeconfig, &ns
	if err := cfg.Init(flags, ns, "secret"); err != nil {
		return nil, fmt.Errorf("helm: %w", err)
	}
	return cfg, nil
}

// HelmInstall installs the chart as docs/release.md says (kubectl create
// namespace, the Pod Security label, helm install --namespace
// rdmanet-system --set namespace.create=false ...) and waits as Install
// does: the DaemonSet and the controller rolled out, the webhooks' CA
// injected. Returns how long `helm install` itself took.
func (l Layout) HelmInstall(ctx context.Context, k Kubectl, st State, out io.Writer) (time.Duration, error) {
	vals, err := l.HelmValues(st.Image)
	if err != nil {
		return 0, err
	}
	chart, err := loader.Load(filepath.Join(l.Repo, ChartDir))
	if err != nil {
		return 0, fmt.Errorf("helm chart %s: %w", ChartDir, err)
	}
	if _, err := k.Output(ctx, "create", "namespace", HelmNamespace); err != nil && !strings.Contains(err.Error(), "AlreadyExists") {
		return 0, err
	}
	if err := k.run(ctx, out, "label", "--overwrite", "namespace", HelmNamespace, "pod-security.kubernetes.io/enforce=privileged"); err != nil {
		return 0, err
	}
	cfg, err := helmConfig(st.Kubeconfig, out)
	if err != nil {
		return 0, err
	}
	inst := action.NewInstall(cfg)
	inst.ReleaseName, inst.Namespace = HelmRelease, HelmNamespace
	inst.WaitStrategy, inst.Timeout = kube.HookOnlyStrategy, 5*time.Minute
	start := time.Now()
	if _, err := inst.RunWithContext(ctx, chart, vals); err != nil {
		return 0, fmt.Errorf("helm install %s %s --namespace %s: %w", HelmRelease, ChartDir, HelmNamespace, err)
	}
	took := time.Since(start)
	fmt.Fprintf(out, "  helm install %s: deployed in %s\n", HelmRelease, took.Round(time.Millisecond))
	return took, l.waitInstalled(ctx, k, out)
}

// HelmUninstall runs `helm uninstall` of the release and deletes the
// namespace HelmInstall made (Helm leaves the CRDs, as it does for every
// chart's crds/).
func (l Layout) HelmUninstall(ctx context.Context, k Kubectl, st State, out io.Writer) error {
	cfg, err := helmConfig(st.Kubeconfig, out)
	if err != nil {
		return err
	}
	un := action.NewUninstall(cfg)
	un.WaitStrategy, un.Timeout = kube.StatusWatcherStrategy, 3*time.Minute
	if _, err := un.Run(HelmRelease); err != nil {
		return fmt.Errorf("helm uninstall %s --namespace %s: %w", HelmRelease, HelmNamespace, err)
	}
	return k.run(ctx, out, "delete", "namespace", HelmNamespace, "--ignore-not-found", "--wait", "--timeout=180s")
}
