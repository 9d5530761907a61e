package ipam

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rdmanet/rdmanet/internal/fsutil"
)

// journal remembers, on the node, which foreign blocks this node borrowed
// addresses from, keyed by owner. ADD and DEL of an attachment always run on
// the same node, so a repeated ADD finds a borrowed address without listing
// every block of the pool. It is written before the borrowing update, under
// the node lock, so a crash can leave a stale entry (harmless: the block is
// read and the entry ignored) but never a missing one.
type journal struct {
	path string
}

func newJournal(dir string, pool Pool) *journal {
	if dir == "" {
		return nil
	}
	return &journal{path: filepath.Join(dir, pool.stateKey()+".borrowed.json")}
}

func ownerKey(o Owner) string { return o.ContainerID + "/" + o.IfName }

func (j *journal) load() (map[string]string, error) {
	m := map[string]string{}
	data, err := os.ReadFile(j.path)
	if errors.Is(err, os.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, fmt.Errorf("rdmanet-ipam: read borrow journal: %w", err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return map[string]string{}, nil // torn by a crash: entries are hints only
	}
	return m, nil
}

func (j *journal) save(m map[string]string) error {
	data, _ := json.Marshal(m)
	if err := fsutil.WriteFileAtomic(j.path, data, 0o600); err != nil {
		return fmt.Errorf("rdmanet-ipam: borrow journal: %w", err)
	}
	return nil
}

// get returns the block owner borrowed from, if any.
func (j *journal) get(o Owner) string {
	if j == nil {
		return ""
	}
	m, err := j.load()
	if err != nil {
		return ""
	}
	return m[ownerKey(o)]
}

func (j *journal) set(o Owner, block string) error {
	if j == nil {
		return nil
	}
	m, err := j.load()
	if err != nil {
		return err
	}
	if block == "" {
		if _, ok := m[ownerKey(o)]; !ok {
			return nil
		}
		delete(m, ownerKey(o))
	} else {
		m[ownerKey(o)] = block
	}
	return j.save(m)
}
