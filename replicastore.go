package scalestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/storage"
	"github.com/scalestore-go/scalestore/storage/nvme"
)

// A node with replicated directories (ClusterOptions.Replicas 2,
// docs/replication.md) keeps the pages of each other directory it is the
// primary or the backup of in a store of their own, beside its own store:
// <data>/node-<id>.db.dir<D> for directory D. Each is an nvme store like
// the node's own (with the same write log), whose metadata names the
// cluster, the node and the directory, so that a file copied to the wrong
// place is refused.

// ReplicaStoreFile is node id's store of directory dir's pages in its data
// directory.
func ReplicaStoreFile(id, dir int) string { return fmt.Sprintf("%s.dir%d", NodeStoreFile(id), dir) }

// replicaMetaMagic starts a replica store's metadata ("SSGOREPL").
const replicaMetaMagic = 0x4C5045524F475353

// replicaStores are a node's stores of other directories, opened when a
// view first needs them and closed with the node.
type replicaStores struct {
	o      ClusterOptions
	mu     sync.Mutex
	stores map[protocol.NodeID]*nvme.Store
}

func (r *replicaStores) path(dir protocol.NodeID) string {
	return r.o.Data + string(os.PathSeparator) + ReplicaStoreFile(r.o.ID, int(dir))
}

// open opens (or, unless mustExist, creates) the store of dir's pages and
// counts its written slots.
func (r *replicaStores) open(dir protocol.NodeID, mustExist bool) (storage.PageStore, uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st := r.stores[dir]; st != nil {
		n, err := st.WrittenSlots()
		return st, n, err
	}
	path := r.path(dir)
	opts := nvme.Options{Slots: clusterStoreSlots, WriteLog: true, WriteLogCached: r.o.Durability == DurabilityProcess}
	_, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist) && mustExist:
		return nil, 0, fmt.Errorf("scalestore: node %d: %s, its store of directory %d's pages, is missing, and the membership view counts this node as holding their current copies: restore the file (a node started afresh, --reformat, no longer counts as holding them, and a directory no other node holds is then lost)", r.o.ID, path, dir)
	case errors.Is(err, os.ErrNotExist):
		opts.Create = true
	case err != nil:
		return nil, 0, fmt.Errorf("scalestore: node %d: directory %d's pages: %w", r.o.ID, dir, err)
	}
	st, err := nvme.Open(path, opts)
	if errors.Is(err, nvme.ErrDirectUnsupported) {
		opts.NoDirect = true
		st, err = nvme.Open(path, opts)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("scalestore: node %d: %s, its store of directory %d's pages, cannot be opened (corrupt?): %w", r.o.ID, path, dir, err)
	}
	want := replicaMeta(r.o, dir)
	if opts.Create {
		err = st.SetMeta(want)
		if err == nil {
			err = st.Sync()
		}
	} else if got := st.Meta(); string(got) != string(want) {
		err = fmt.Errorf("scalestore: node %d: %s is not this node's store of directory %d's pages (its metadata %x, want %x): corrupt or misplaced", r.o.ID, path, dir, got, want)
	}
	var written uint64
	if err == nil {
		written, err = st.WrittenSlots()
	}
	if err != nil {
		st.Abandon()
		return nil, 0, err
	}
	if r.stores == nil {
		r.stores = map[protocol.NodeID]*nvme.Store{}
	}
	r.stores[dir] = st
	return st, written, nil
}

func replicaMeta(o ClusterOptions, dir protocol.NodeID) []byte {
	b := binary.LittleEndian.AppendUint64(nil, replicaMetaMagic)
	b = binary.LittleEndian.AppendUint64(b, o.ClusterID)
	b = binary.LittleEndian.AppendUint64(b, uint64(o.ID))
	return binary.LittleEndian.AppendUint64(b, uint64(dir))
}

// close closes the stores (clean: the node stopped cleanly) or abandons
// them.
func (r *replicaStores) close(clean bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for dir, st := range r.stores {
		if !clean {
			st.Abandon()
			continue
		}
		if err := st.Close(); err != nil {
			errs = append(errs, fmt.Errorf("scalestore: node %d: closing its store of directory %d: %w", r.o.ID, dir, err))
		}
	}
	r.stores = nil
	return errors.Join(errs...)
}
