package apiserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func withCodec(c *rest.Config) *rest.Config {
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme.Scheme).WithoutConversion()
	return c
}

// ApplyCRDs installs every CRD under the repository's deploy/crds and waits
// until each is established.
func (s *Server) ApplyCRDs(ctx context.Context) error {
	dir, err := CRDDir()
	if err != nil {
		return err
	}
	return ApplyCRDFiles(ctx, s.Config(), dir)
}

// ApplyCRDFiles creates (or updates) the CRDs of every *.yaml file in dir.
func ApplyCRDFiles(ctx context.Context, cfg *rest.Config, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var obj unstructured.Unstructured
			if err := dec.Decode(&obj.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return fmt.Errorf("apiserver: decode %s: %w", f, err)
			}
			if obj.Object == nil {
				continue
			}
			if obj.GetKind() != "CustomResourceDefinition" {
				continue
			}
			if err := applyCRD(ctx, dc, &obj); err != nil {
				return fmt.Errorf("apiserver: apply %s from %s: %w", obj.GetName(), f, err)
			}
		}
	}
	return nil
}

func applyCRD(ctx context.Context, dc dynamic.Interface, obj *unstructured.Unstructured) error {
	cli := dc.Resource(crdGVR)
	_, err := cli.Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		cur, gerr := cli.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if gerr != nil {
			return gerr
		}
		obj.SetResourceVersion(cur.GetResourceVersion())
		_, err = cli.Update(ctx, obj, metav1.UpdateOptions{})
	}
	if err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		cur, err := cli.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err == nil && established(cur) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("CRD %s not established after 60s", obj.GetName())
}

func established(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && strings.EqualFold(fmt.Sprint(m["status"]), "true") {
			return true
		}
	}
	return false
}
