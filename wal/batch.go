package wal

import (
	"encoding/binary"
	"fmt"
)

// BatchWrite is one write of a Batch record.
type BatchWrite struct {
	Op       Op // Put or Delete
	Key, Val []byte
}

// AppendBatch adds the writes of one transaction as a single record, so
// that Replay applies all of them or, if the record is torn, none. It
// returns the record's LSN, as Append does.
func (l *Log) AppendBatch(writes []BatchWrite) (uint64, error) {
	var b []byte
	for _, w := range writes {
		if w.Op != Put && w.Op != Delete {
			return 0, fmt.Errorf("wal: a batch write of op %d", w.Op)
		}
		b = append(b, byte(w.Op))
		b = binary.AppendUvarint(b, uint64(len(w.Key)))
		b = append(b, w.Key...)
		b = binary.AppendUvarint(b, uint64(len(w.Val)))
		b = append(b, w.Val...)
	}
	return l.Append(Batch, nil, b)
}

// eachBatchWrite calls fn for every write encoded in b, until fn fails; ok
// is false if b does not decode.
func eachBatchWrite(b []byte, fn func(op Op, key, val []byte) error) (ok bool, err error) {
	for len(b) > 0 {
		op := Op(b[0])
		if op != Put && op != Delete {
			return false, nil
		}
		b = b[1:]
		var kv [2][]byte
		for i := range kv {
			n, m := binary.Uvarint(b)
			if m <= 0 || n > uint64(len(b)-m) {
				return false, nil
			}
			kv[i] = b[m : m+int(n)]
			b = b[m+int(n):]
		}
		if fn != nil {
			if err := fn(op, kv[0], kv[1]); err != nil {
				return true, err
			}
		}
	}
	return true, nil
}

func validBatch(b []byte) bool {
	ok, _ := eachBatchWrite(b, nil)
	return ok
}

func replayBatch(b []byte, fn func(op Op, key, val []byte) error) error {
	_, err := eachBatchWrite(b, fn)
	return err
}
