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
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/rdmanet/rdmanet/internal/devinfo"
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
	SetNetworkStatus(ctx context.Context, namespace, name string, uid k8stypes.UID, status []devinfo.NetworkStatus) error
}

// --- static directory -------------------------------------------------------

// StaticSource reads pods and NADs from a directory of YAML/JSON manifests
// (multi-document files allowed) and records network-status as files. It is
// for nodes without API access and for the simulated-node demo. It reads
// the directory again when its modification time changes (a manifest was
// created, removed or renamed into place), so one instance serves a
// long-running daemon while pods come and go.
type StaticSource struct {
	Dir       string
	StatusDir string

	mu     sync.Mutex
	loaded bool
	mtime  time.Time
	pods   map[string]*corev1.Pod
	nads   map[string]*nadv1.NetworkAttachmentDefinition
	err    error
}

// current reloads the manifests when the directory changed since the last
// read, and returns them.
func (s *StaticSource) current() (map[string]*corev1.Pod, map[string]*nadv1.NetworkAttachmentDefinition, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := os.Stat(s.Dir)
	if err != nil {
		return nil, nil, fmt.Errorf("static source %s: %w", s.Dir, err)
	}
	if !s.loaded || !st.ModTime().Equal(s.mtime) {
		s.err = nil
		s.load()
		s.loaded, s.mtime = true, st.ModTime()
	}
	return s.pods, s.nads, s.err
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
	pods, _, err := s.current()
	if err != nil {
		return nil, err
	}
	if p := pods[ns+"/"+name]; p != nil {
		return p.DeepCopy(), nil
	}
	return nil, fmt.Errorf("pod %s/%s in %s: %w", ns, name, s.Dir, ErrNotFound)
}

func (s *StaticSource) NAD(_ context.Context, ns, name string) (*nadv1.NetworkAttachmentDefinition, error) {
	_, nads, err := s.current()
	if err != nil {
		return nil, err
	}
	if n := nads[ns+"/"+name]; n != nil {
		return n.DeepCopy(), nil
	}
	return nil, fmt.Errorf("NetworkAttachmentDefinition %s/%s in %s: %w", ns, name, s.Dir, ErrNotFound)
}

// StatusPath is where the static source records a pod's network-status.
func (s *StaticSource) StatusPath(ns, name string) string {
	return filepath.Join(s.StatusDir, ns+"_"+name+".json")
}

// SetNetworkStatus records status for the pod, which must still exist
// with uid (as the API server's UID precondition does): a pod deleted or
// recreated meanwhile gets nothing, and the error wraps ErrNotFound.
func (s *StaticSource) SetNetworkStatus(ctx context.Context, ns, name string, uid k8stypes.UID, status []devinfo.NetworkStatus) error {
	p, err := s.Pod(ctx, ns, name)
	if err != nil {
		return fmt.Errorf("set network-status: %w", err)
	}
	if uid != "" && p.UID != "" && p.UID != uid {
		return fmt.Errorf("set network-status on pod %s/%s: it was recreated (UID %s, not %s): %w", ns, name, p.UID, uid, ErrNotFound)
	}
	b, err := json.MarshalIndent(status, "", "    ")
	if err != nil {
		return fmt.Errorf("encode network-status: %w", err)
	}
	if err := checkStatusName(ns, name); err != nil {
		return err
	}
	if err := fsutil.PrivateDir(s.StatusDir); err != nil {
		return fmt.Errorf("network-status dir: %w", err)
	}
	return writeAtomic(s.StatusPath(ns, name), append(bytes.TrimSpace(b), '\n'))
}

// writeAtomic writes the plugin's state (cache records, network-status
// files): root-only, like every state file of rdmanet.
func writeAtomic(path string, b []byte) error {
	return fsutil.WriteFileAtomic(path, b, 0o600)
}
