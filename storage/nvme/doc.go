// Package nvme is the persistent storage.PageStore: pages live in a file or
// block device opened with O_DIRECT and are read and written through an
// io_uring ring the package drives itself (on golang.org/x/sys/unix; no cgo,
// no liburing), falling back to pread/pwrite when io_uring is unavailable.
//
// # Layout
//
// Page 0 is the superblock; slot s lives at byte offset (s+1)*4096. The
// superblock holds the magic "SSGOSTOR", the format version, the page size,
// the capacity in slots, a clean-shutdown flag, a generation counter and an
// opaque metadata blob of up to MaxMeta bytes that the engine owns (catalog
// PID, allocator state, free slots; see Store.Meta and Store.SetMeta). The
// last four bytes of the superblock are a CRC32C (Castagnoli) of the rest.
//
// Every data page ends in a TrailerSize-byte trailer the store owns:
//
//	[4080,4084) CRC32C of bytes [0,4080), little endian
//	[4084,4092) the slot number, little endian
//	[4092,4096) the trailer magic/version "SSP1"
//
// so only DataSize bytes of a page carry the caller's data. WritePage stamps
// the trailer into a private aligned copy (the caller's buffer is never
// modified; whatever the caller had in its last 16 bytes is not stored), and
// ReadPage verifies it: a torn, corrupted or misdirected page yields an error
// wrapping ErrCorrupt that names the slot and is never served. On success
// ReadPage returns the DataSize data bytes followed by TrailerSize zero bytes,
// so a caller that keeps its trailer bytes zero sees exactly what it wrote,
// as with storage/memfile. A slot never written (all zeros on disk, which is
// what a freshly created store file holds) reads as a zero page without
// error.
//
// # Buffers
//
// O_DIRECT needs aligned memory, which the Go heap does not promise, so the
// store keeps a pool of aligned pages mapped with anonymous mmap (outside the
// Go heap, so the kernel may write into them while Go code runs and the
// garbage collector never moves them). Writes are copied into it, because
// the store stamps the trailer and the caller's buffer is not modified.
// A read into a buffer that starts on a page boundary, which every frame of
// the engine's off-heap cache does, goes straight into that buffer and is
// verified there: no copy. A read into any other buffer lands in the pool
// and is copied out once verified. A direct read that fails leaves zeros in
// the buffer; a copied one leaves the buffer as it was.
//
// # Concurrency and asynchronous I/O
//
// A Store is safe for use by one goroutine at a time; callers serialize, as
// the storage.PageStore contract says. The package starts no goroutines.
// ReadAsync and WriteAsync queue a request and return; requests reach the
// kernel and complete inside Poll, which also calls the requests' done
// callbacks. Up to Options.QueueDepth requests are in flight; see ReadAsync
// for the exact rules. The synchronous ReadPage and WritePage are built on
// the same path (submit, then wait).
//
// # Durability
//
// A completed write has reached the device, but possibly only its volatile
// write cache: Sync (and Close) flush the device cache with fdatasync and
// then persist the superblock, so everything written before Sync and the
// metadata set before it survive a crash. Close marks the store clean;
// WasClean reports whether the previous user closed it. The superblock says
// "in use" before any page can differ from what the last clean close left:
// Open of an existing store marks it so at once, and a store just formatted,
// which holds nothing and is formatted clean, marks itself in use before its
// first data write (or at its first Sync). A new file is formatted under a
// temporary name (path + ".creating") and renamed into place, so a process
// killed while creating it leaves no half-formatted store. WrittenSlots
// tells how far the file's data goes, for a reader of a store that was not
// closed cleanly, whose pages can lie past what its metadata counts.
//
// # Write log
//
// With Options.WriteLog a write is acknowledged once its page image is in a
// redo log beside the store (path + WriteLogSuffix): every write queued
// while the previous log write was in flight goes in the next one, as one
// sequential write (group commit), and each slot is written in place later
// by a checkpoint, once however often it changed. Reads of a slot whose
// newest image is in the log are served from memory. Open of a store that
// was not closed cleanly writes the log's acknowledged pages back first;
// Sync and Close write every page back, so a closed store needs no log.
// wlog.go has the layout and the recovery rules.
//
// # Space
//
// A store file is sparse: Reserve preallocates (fallocate) the slots a
// caller is about to use, a chunk at a time, so that a full filesystem
// refuses the allocation of a page rather than the write of a page that
// was already taken (which would leave the caller's state half on disk).
// Abandon releases a store without marking it clean, for a caller whose
// flush failed.
//
// # Imports
//
// This package implements storage.PageStore and may import only the storage
// and protocol packages of this module. It must never import the simulator,
// bufmgr or actors: those sit above the page store.
//
// The implementation is Linux-only.
package nvme
