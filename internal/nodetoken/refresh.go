package nodetoken

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/rdmanet/rdmanet/internal/fsutil"
)

// DefaultInterval is how often Refresher looks at the projected token.
// kubelet rotates a one-hour token 48 minutes into its life, so the host
// file is at most this much behind with 12 minutes of the old token left.
const DefaultInterval = 30 * time.Second

// Mode of the host token file.
const Mode = 0o600

// Refresher copies the pod's projected token (Source) to the host file the
// host-side kubeconfigs read (Dest) whenever it changes.
type Refresher struct {
	Source   string
	Dest     string
	Interval time.Duration // DefaultInterval when zero
	Log      *slog.Logger
	Now      func() time.Time // time.Now when nil
}

func (r *Refresher) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Refresher) log() *slog.Logger {
	if r.Log != nil {
		return r.Log
	}
	return slog.New(slog.DiscardHandler)
}

// Sync makes one round: when Source holds a token that is not yet expired
// and differs from Dest's, Dest is replaced atomically (mode 0600). It
// reports whether it wrote. An expired or unreadable Source leaves Dest as
// it is and is an error naming the file.
func (r *Refresher) Sync() (bool, error) {
	src, err := os.ReadFile(r.Source)
	if err != nil {
		return false, fmt.Errorf("projected token %s: %w; fix: the DaemonSet must mount the serviceAccountToken projection there", r.Source, err)
	}
	src = bytes.TrimSpace(src)
	if len(src) == 0 {
		return false, fmt.Errorf("projected token %s is empty", r.Source)
	}
	c, err := Parse(src)
	if err != nil {
		return false, fmt.Errorf("projected token %s: %w", r.Source, err)
	}
	if !c.Expiry.IsZero() && !r.now().Before(c.Expiry) {
		return false, fmt.Errorf("%w: projected token %s expired at %s: kubelet has not rotated it; the host file %s is left as it is", ErrExpired, r.Source, c.Expiry.Format(time.RFC3339), r.Dest)
	}
	old, err := os.ReadFile(r.Dest)
	if err == nil && bytes.Equal(old, src) {
		if st, err := os.Stat(r.Dest); err == nil && st.Mode().Perm() == Mode {
			return false, nil
		}
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("host token %s: %w", r.Dest, err)
	}
	if err := fsutil.WriteFileAtomic(r.Dest, src, Mode); err != nil {
		return false, fmt.Errorf("write host token %s: %w; fix: mount its directory read-write into this container", r.Dest, err)
	}
	r.log().Info("node token refreshed on the host", "file", r.Dest, "from", r.Source, "expires", c.Expiry.Format(time.RFC3339), "node", c.Node, "pod", c.Pod)
	return true, nil
}

// Run calls Sync now and every Interval until ctx ends. An error is logged
// when it first appears or changes (not every round), and when it clears.
func (r *Refresher) Run(ctx context.Context) {
	every := r.Interval
	if every <= 0 {
		every = DefaultInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	last := ""
	for {
		_, err := r.Sync()
		switch {
		case err != nil && err.Error() != last:
			r.log().Error("node token not refreshed", "file", r.Dest, "err", err)
			last = err.Error()
		case err == nil && last != "":
			r.log().Info("node token refresh works again", "file", r.Dest)
			last = ""
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
