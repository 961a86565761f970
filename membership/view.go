package membership

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/scalestore-go/scalestore/protocol"
)

// View is one agreed membership of the cluster: its number and its members.
type View struct {
	Number  uint64
	Members []protocol.NodeID // sorted, no duplicates
}

// Has reports whether id is a member of v.
func (v View) Has(id protocol.NodeID) bool {
	_, ok := slices.BinarySearch(v.Members, id)
	return ok
}

// String formats v as "view 7 {0 2}".
func (v View) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "view %d {", v.Number)
	for i, id := range v.Members {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d", id)
	}
	b.WriteByte('}')
	return b.String()
}

// wireView is the view key's JSON. Members are ints, not NodeIDs: a slice
// of a uint8 type would be encoded as a base64 string.
type wireView struct {
	Number  uint64 `json:"number"`
	Members []int  `json:"members"`
}

func encodeView(v View) (string, error) {
	w := wireView{Number: v.Number, Members: make([]int, len(v.Members))}
	for i, id := range v.Members {
		w.Members[i] = int(id)
	}
	b, err := json.Marshal(w)
	if err != nil {
		return "", fmt.Errorf("membership: encoding %v: %w", v, err)
	}
	return string(b), nil
}

// decodeView parses the view key's value. The value comes from etcd, which
// anyone with access can write, so it is checked rather than trusted;
// members are sorted and deduplicated.
func decodeView(b []byte) (View, error) {
	var w wireView
	if err := json.Unmarshal(b, &w); err != nil {
		return View{}, fmt.Errorf("membership: decoding view %q: %w", b, err)
	}
	if w.Number == 0 {
		return View{}, fmt.Errorf("membership: decoding view %q: number 0", b)
	}
	v := View{Number: w.Number, Members: make([]protocol.NodeID, 0, len(w.Members))}
	for _, id := range w.Members {
		if id < 0 || id >= protocol.MaxNodes {
			return View{}, fmt.Errorf("membership: decoding view %q: node id %d out of range", b, id)
		}
		v.Members = append(v.Members, protocol.NodeID(id))
	}
	slices.Sort(v.Members)
	v.Members = slices.Compact(v.Members)
	return v, nil
}
