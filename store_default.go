package scalestore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/scalestore-go/scalestore/storage/nvme"
)

// StoreFile is the file in the data directory that holds the pages.
const StoreFile = "scalestore.db"

// defaultStore opens the store Open uses when Options.OpenStore is nil: one
// file in dir, read and written with O_DIRECT through io_uring (buffered
// pread/pwrite where the filesystem refuses O_DIRECT, e.g. tmpfs).
var defaultStore = func(dir string, slots uint64) (Store, error) {
	path := filepath.Join(dir, StoreFile)
	opts := nvme.Options{Journal: true}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		opts.Create, opts.Slots = true, slots // a new store; Create would discard an existing one
	} else if err != nil {
		return nil, fmt.Errorf("scalestore: %w", err)
	}
	s, err := nvme.Open(path, opts)
	if errors.Is(err, nvme.ErrDirectUnsupported) {
		opts.NoDirect = true
		s, err = nvme.Open(path, opts)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}
