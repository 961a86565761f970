package scalestore

// defaultStore opens the store Open uses when Options.OpenStore is nil; set
// by the file that links the NVMe store.
var defaultStore func(dir string, slots uint64) (Store, error)
