package apiserver

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// ApplyRBACFile creates the ClusterRoles and ClusterRoleBindings of a
// manifest of the repository (path relative to the repository root, e.g.
// deploy/rbac-daemon.yaml) with strict field validation, and skips the
// other kinds it holds (ServiceAccounts: impersonation needs none). Objects
// that exist already are left as they are.
func ApplyRBACFile(ctx context.Context, admin kubernetes.Interface, path string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		return err
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for {
		doc, err := r.Read()
		if err != nil {
			return nil // io.EOF: done
		}
		var o struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &o); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		strict := metav1.CreateOptions{FieldValidation: "Strict"}
		switch o.Kind {
		case "ClusterRole":
			var cr rbacv1.ClusterRole
			if err := yaml.UnmarshalStrict(doc, &cr); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &cr, strict); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("%s: create ClusterRole %s: %w", path, cr.Name, err)
			}
		case "ClusterRoleBinding":
			var crb rbacv1.ClusterRoleBinding
			if err := yaml.UnmarshalStrict(doc, &crb); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &crb, strict); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("%s: create ClusterRoleBinding %s: %w", path, crb.Name, err)
			}
		}
	}
}
