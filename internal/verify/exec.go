package verify

import (
	"bytes"
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
)

// RemoteExecutor runs commands through the API server's pods/exec, as
// kubectl exec does: WebSocket (v5 streaming protocol) first, falling back
// to SPDY where the server or a proxy cannot upgrade.
type RemoteExecutor struct {
	Config *rest.Config
	Client kubernetes.Interface
}

// Exec implements Executor.
func (e RemoteExecutor) Exec(ctx context.Context, ns, pod, container string, command []string) (string, string, error) {
	req := e.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: command, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	spdy, err := remotecommand.NewSPDYExecutor(e.Config, "POST", req.URL())
	if err != nil {
		return "", "", fmt.Errorf("exec into pod %s/%s: SPDY executor: %w", ns, pod, err)
	}
	ws, err := remotecommand.NewWebSocketExecutor(e.Config, "GET", req.URL().String())
	if err != nil {
		return "", "", fmt.Errorf("exec into pod %s/%s: WebSocket executor: %w", ns, pod, err)
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return "", "", fmt.Errorf("exec into pod %s/%s: %w", ns, pod, err)
	}
	var out, errb bytes.Buffer
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errb}); err != nil {
		return out.String(), errb.String(), fmt.Errorf("exec into pod %s/%s container %s: %w", ns, pod, container, err)
	}
	return out.String(), errb.String(), nil
}
