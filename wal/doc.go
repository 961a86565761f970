// Package wal is the embedded store's redo log: a file of key-value
// records (a put with its value, a delete), each checksummed and tagged
// with the epoch it belongs to, appended with group commit: Commit returns
// once a record is durable, and writers that wait together share one write
// and one fdatasync.
//
// The log is rewritten from its start in each epoch (Start), which the
// caller begins whenever a checkpoint has made the records so far
// redundant; Replay reads the records of one epoch from the start and stops
// at the first that does not verify (a torn tail) or belongs to another
// epoch (what an older, longer epoch left past this one's end). The file is
// grown with zeros ahead of the writes, a chunk at a time, so that the
// fdatasync of a commit flushes data and not the file's size.
//
// It must import nothing of this module: it knows keys and values, not
// pages.
package wal
