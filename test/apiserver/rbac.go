package apiserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// ApplyRBACFile creates the objects of an RBAC manifest of the repository
// (path relative to the repository root, e.g. deploy/rbac-daemon.yaml):
// ServiceAccounts, ClusterRoles, ClusterRoleBindings, Roles and
// RoleBindings, decoded strictly and created with strict field validation,
// the namespaces they name created when missing. Objects that exist already
// are left as they are; any other kind is an error (an RBAC file holds
// nothing else).
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
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := applyRBACDoc(ctx, admin, doc); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
}

func applyRBACDoc(ctx context.Context, admin kubernetes.Interface, doc []byte) error {
	var meta struct {
		Kind     string            `json:"kind"`
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		return err
	}
	if meta.Kind == "" {
		return nil // comments only
	}
	if ns := meta.Metadata.Namespace; ns != "" {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("namespace %s: %w", ns, err)
		}
	}
	strict := metav1.CreateOptions{FieldValidation: "Strict"}
	var err error
	switch meta.Kind {
	case "ServiceAccount":
		var o corev1.ServiceAccount
		if err = yaml.UnmarshalStrict(doc, &o); err == nil {
			_, err = admin.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, &o, strict)
		}
	case "ClusterRole":
		var o rbacv1.ClusterRole
		if err = yaml.UnmarshalStrict(doc, &o); err == nil {
			_, err = admin.RbacV1().ClusterRoles().Create(ctx, &o, strict)
		}
	case "ClusterRoleBinding":
		var o rbacv1.ClusterRoleBinding
		if err = yaml.UnmarshalStrict(doc, &o); err == nil {
			_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &o, strict)
		}
	case "Role":
		var o rbacv1.Role
		if err = yaml.UnmarshalStrict(doc, &o); err == nil {
			_, err = admin.RbacV1().Roles(o.Namespace).Create(ctx, &o, strict)
		}
	case "RoleBinding":
		var o rbacv1.RoleBinding
		if err = yaml.UnmarshalStrict(doc, &o); err == nil {
			_, err = admin.RbacV1().RoleBindings(o.Namespace).Create(ctx, &o, strict)
		}
	default:
		return fmt.Errorf("unexpected kind %q in an RBAC file", meta.Kind)
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("%s %s: %w", meta.Kind, meta.Metadata.Name, err)
	}
	return nil
}
