package scalestore

import (
	"path/filepath"

	"github.com/scalestore-go/scalestore/storage/filestore"
)

// defaultStore opens the store Open uses when Options.OpenStore is nil: one
// file in dir.
var defaultStore = func(dir string, slots uint64) (Store, error) {
	return filestore.Open(filepath.Join(dir, "scalestore.db"), slots)
}
