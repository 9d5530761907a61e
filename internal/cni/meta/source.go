package meta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/rdmanet/rdmanet/internal/fsutil"
)

// ErrNotFound is returned by a Source for a pod or NAD that does not exist.
var ErrNotFound = errors.New("not found")

// Source is where pods and NADs come from, and where network-status goes.
type Source interface {
	Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	NAD(ctx context.Context, namespace, name string) (*nadv1.NetworkAttachmentDefinition, error)
	// SetNetworkStatus records the pod's network-status annotation and
	// touches nothing else on the pod. uid guards against writing onto a
	// recreated pod of the same name.
	SetNetworkStatus(ctx context.Context, namespace, name string, uid k8stypes.UID, status []nadv1.NetworkStatus) error
}

// --- Kubernetes API ---------------------------------------------------------

// KubeSource reads pods and NADs from the API server.
type KubeSource struct {
	Core kubernetes.Interface
	NADs nadclient.Interface
}

// NewKubeSource builds clients from a kubeconfig file.
func NewKubeSource(kubeconfig string, qps float32) (*KubeSource, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	if qps > 0 {
		cfg.QPS, cfg.Burst = qps, int(qps*2)
	}
	cfg.UserAgent = "rdmanet-cni"
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	nads, err := nadclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("NAD client: %w", err)
	}
	return &KubeSource{Core: core, NADs: nads}, nil
}

func (k *KubeSource) Pod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	p, err := k.Core.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("pod %s/%s: %w", ns, name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get pod %s/%s: %w", ns, name, err)
	}
	return p, nil
}

func (k *KubeSource) NAD(ctx context.Context, ns, name string) (*nadv1.NetworkAttachmentDefinition, error) {
	n, err := k.NADs.K8sCniCncfIoV1().NetworkAttachmentDefinitions(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("NetworkAttachmentDefinition %s/%s: %w", ns, name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get NetworkAttachmentDefinition %s/%s: %w", ns, name, err)
	}
	return n, nil
}

func (k *KubeSource) SetNetworkStatus(ctx context.Context, ns, name string, uid k8stypes.UID, status []nadv1.NetworkStatus) error {
	b, err := json.MarshalIndent(status, "", "    ")
	if err != nil {
		return fmt.Errorf("encode network-status: %w", err)
	}
	// A merge patch on one annotation, with the UID as a precondition:
	// nothing else on the pod is touched, and a recreated pod is not written.
	patch := map[string]any{"metadata": map[string]any{
		"uid":         string(uid),
		"annotations": map[string]string{NetworkStatusAnnotation: string(b)},
	}}
	pb, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("encode patch: %w", err)
	}
	_, err = k.Core.CoreV1().Pods(ns).Patch(ctx, name, k8stypes.MergePatchType, pb, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("set network-status on pod %s/%s: %w", ns, name, err)
	}
	return nil
}

// --- static directory -------------------------------------------------------

// StaticSource reads pods and NADs from a directory of YAML/JSON manifests
// (multi-document files allowed) and records network-status as files. It is
// for nodes without API access and for the simulated-node demo.
type StaticSource struct {
	Dir       string
	StatusDir string

	once sync.Once
	pods map[string]*corev1.Pod
	nads map[string]*nadv1.NetworkAttachmentDefinition
	err  error
}

var yamlDocSep = regexp.MustCompile(`(?m)^---\s*$`)

func (s *StaticSource) load() {
	s.pods, s.nads = map[string]*corev1.Pod{}, map[string]*nadv1.NetworkAttachmentDefinition{}
	var files []string
	err := filepath.WalkDir(s.Dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch strings.ToLower(filepath.Ext(p)) {
		case ".yaml", ".yml", ".json":
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		s.err = fmt.Errorf("static source %s: %w", s.Dir, err)
		return
	}
	sort.Strings(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			s.err = fmt.Errorf("static source: %w", err)
			return
		}
		for i, doc := range yamlDocSep.Split(string(b), -1) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
				s.err = fmt.Errorf("static source: %s document %d: %w", f, i+1, err)
				return
			}
			switch tm.Kind {
			case "Pod":
				var p corev1.Pod
				if err := yaml.UnmarshalStrict([]byte(doc), &p); err != nil {
					s.err = fmt.Errorf("static source: %s document %d (Pod): %w", f, i+1, err)
					return
				}
				if p.Namespace == "" {
					p.Namespace = "default"
				}
				s.pods[p.Namespace+"/"+p.Name] = &p
			case "NetworkAttachmentDefinition":
				var n nadv1.NetworkAttachmentDefinition
				if err := yaml.Unmarshal([]byte(doc), &n); err != nil {
					s.err = fmt.Errorf("static source: %s document %d (NetworkAttachmentDefinition): %w", f, i+1, err)
					return
				}
				if n.Namespace == "" {
					n.Namespace = "default"
				}
				s.nads[n.Namespace+"/"+n.Name] = &n
			}
		}
	}
}

func (s *StaticSource) Pod(_ context.Context, ns, name string) (*corev1.Pod, error) {
	s.once.Do(s.load)
	if s.err != nil {
		return nil, s.err
	}
	if p := s.pods[ns+"/"+name]; p != nil {
		return p.DeepCopy(), nil
	}
	return nil, fmt.Errorf("pod %s/%s in %s: %w", ns, name, s.Dir, ErrNotFound)
}

func (s *StaticSource) NAD(_ context.Context, ns, name string) (*nadv1.NetworkAttachmentDefinition, error) {
	s.once.Do(s.load)
	if s.err != nil {
		return nil, s.err
	}
	if n := s.nads[ns+"/"+name]; n != nil {
		return n.DeepCopy(), nil
	}
	return nil, fmt.Errorf("NetworkAttachmentDefinition %s/%s in %s: %w", ns, name, s.Dir, ErrNotFound)
}

// StatusPath is where the static source records a pod's network-status.
func (s *StaticSource) StatusPath(ns, name string) string {
	return filepath.Join(s.StatusDir, ns+"_"+name+".json")
}

func (s *StaticSource) SetNetworkStatus(_ context.Context, ns, name string, _ k8stypes.UID, status []nadv1.NetworkStatus) error {
	b, err := json.MarshalIndent(status, "", "    ")
	if err != nil {
		return fmt.Errorf("encode network-status: %w", err)
	}
	if err := os.MkdirAll(s.StatusDir, 0o755); err != nil {
		return fmt.Errorf("network-status dir: %w", err)
	}
	return writeAtomic(s.StatusPath(ns, name), append(bytes.TrimSpace(b), '\n'))
}

func writeAtomic(path string, b []byte) error {
	return fsutil.WriteFileAtomic(path, b, 0o644)
}
