package ipam

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	v1alpha1 "github.com/rdmanet/rdmanet/api/ipam/v1alpha1"
	"github.com/rdmanet/rdmanet/internal/nodetoken"
)

// KubeStore keeps blocks as IPAMBlock objects (rdmanet.io/v1alpha1, cluster
// scoped). Creates fail with AlreadyExists and updates carry the
// resourceVersion, which the API server turns into ErrConflict.
type KubeStore struct {
	client rest.Interface
}

// kubeScheme knows the rdmanet.io/v1alpha1 types. It is built on first use,
// not in an init function: every exec of the CNI plugin would pay for it,
// also with the local store.
var kubeScheme = sync.OnceValue(func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	metav1.AddToGroupVersion(s, metav1.SchemeGroupVersion)
	return s
})

// NewKubeStore returns a store over the API server of cfg.
func NewKubeStore(cfg *rest.Config) (*KubeStore, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &v1alpha1.SchemeGroupVersion
	c.APIPath = "/apis"
	c.NegotiatedSerializer = serializer.NewCodecFactory(kubeScheme()).WithoutConversion()
	c.ContentType = runtime.ContentTypeJSON
	if c.UserAgent == "" {
		c.UserAgent = "rdmanet-ipam"
	}
	client, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("rdmanet-ipam: kubernetes client: %w", err)
	}
	return &KubeStore{client: client}, nil
}

// RESTConfigFromKubeconfig loads a kubeconfig file for the kubernetes store.
// Client-side rate limiting is off: the store makes one or two requests per call.
func RESTConfigFromKubeconfig(path string) (*rest.Config, error) {
	cfg, err := loadKubeconfig(path)
	if err != nil {
		return nil, fmt.Errorf("rdmanet-ipam: load kubeconfig %s: %w; fix: point store.kubeconfig (or kubernetes.kubeconfig) at a readable kubeconfig", path, err)
	}
	return cfg, nil
}

// loadKubeconfig loads exactly the file at path: an empty path is an error,
// never the in-cluster or default kubeconfig.
func loadKubeconfig(path string) (*rest.Config, error) {
	if path == "" {
		return nil, errors.New("no kubeconfig file given")
	}
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, err
	}
	// The node's token expires (docs/security.md): past its expiry, fail
	// closed here naming the file, not with the API server's bare 401.
	if err := nodetoken.Check(cfg.BearerTokenFile, time.Now()); err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = -1, -1
	return cfg, nil
}

// List implements Store.
func (s *KubeStore) List(ctx context.Context, pool Pool, node string) ([]v1alpha1.IPAMBlock, error) {
	sel := labels.Set(ListSelector(pool, node))
	var list v1alpha1.IPAMBlockList
	req := s.client.Get().Resource(v1alpha1.IPAMBlockResource)
	if len(sel) > 0 {
		req = req.Param("labelSelector", sel.String())
	}
	if err := req.Do(ctx).Into(&list); err != nil {
		return nil, classify(ctx, "list blocks", err)
	}
	out := list.Items[:0]
	for i := range list.Items {
		if BlockMatches(&list.Items[i], pool, node) {
			out = append(out, list.Items[i])
		}
	}
	return out, nil
}

// Get implements Store.
func (s *KubeStore) Get(ctx context.Context, name string) (*v1alpha1.IPAMBlock, error) {
	var b v1alpha1.IPAMBlock
	if err := s.client.Get().Resource(v1alpha1.IPAMBlockResource).Name(name).Do(ctx).Into(&b); err != nil {
		return nil, classify(ctx, "get block "+name, err)
	}
	return &b, nil
}

// Create implements Store.
func (s *KubeStore) Create(ctx context.Context, b *v1alpha1.IPAMBlock) (*v1alpha1.IPAMBlock, error) {
	var out v1alpha1.IPAMBlock
	if err := s.client.Post().Resource(v1alpha1.IPAMBlockResource).Body(b).Do(ctx).Into(&out); err != nil {
		return nil, classify(ctx, "create block "+b.Name, err)
	}
	return &out, nil
}

// Update implements Store.
func (s *KubeStore) Update(ctx context.Context, b *v1alpha1.IPAMBlock) (*v1alpha1.IPAMBlock, error) {
	var out v1alpha1.IPAMBlock
	if err := s.client.Put().Resource(v1alpha1.IPAMBlockResource).Name(b.Name).Body(b).Do(ctx).Into(&out); err != nil {
		return nil, classify(ctx, "update block "+b.Name, err)
	}
	return &out, nil
}

// Delete implements Store.
func (s *KubeStore) Delete(ctx context.Context, b *v1alpha1.IPAMBlock) error {
	opts := &metav1.DeleteOptions{}
	if b.ResourceVersion != "" {
		opts.Preconditions = &metav1.Preconditions{ResourceVersion: &b.ResourceVersion}
	}
	err := s.client.Delete().Resource(v1alpha1.IPAMBlockResource).Name(b.Name).Body(opts).Do(ctx).Error()
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return classify(ctx, "delete block "+b.Name, err)
	}
	return nil
}

// classify wraps err with the Store sentinel that tells the allocator what to
// do. A timeout or cancellation is final only when the caller's ctx ended; a
// per-request timeout (rest.Config.Timeout) with ctx alive is transient.
func classify(ctx context.Context, op string, err error) error {
	var kind error
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("rdmanet-ipam: %s: %w (%w)", op, ctx.Err(), err)
	case apierrors.IsAlreadyExists(err), apierrors.IsConflict(err):
		kind = ErrConflict
	case apierrors.IsNotFound(err):
		kind = ErrNotFound
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		kind = ErrTransient
	case apierrors.IsTooManyRequests(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		apierrors.IsServiceUnavailable(err), apierrors.IsInternalError(err), apierrors.IsUnexpectedServerError(err):
		kind = ErrTransient
	default:
		var status apierrors.APIStatus
		var netErr net.Error
		if errors.As(err, &status) && status.Status().Code >= 500 {
			kind = ErrTransient
		} else if errors.As(err, &netErr) || !errors.As(err, &status) {
			// Connection refused/reset, EOF, TLS handshake: the server is away.
			kind = ErrTransient
		}
	}
	if kind == nil {
		return fmt.Errorf("rdmanet-ipam: %s: %w", op, err)
	}
	return fmt.Errorf("rdmanet-ipam: %s: %w: %w", op, kind, err)
}
