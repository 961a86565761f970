package membership

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/scalestore-go/scalestore/protocol"
)

// View is one agreed membership of the cluster: its number and its members.
//
// With replicated directories (Replicas 2, docs/replication.md) it also
// records, for every directory, the nodes whose store of it holds every
// acknowledged write (Current): the primary, and the backup once the
// primary copied the directory to it. Every node reads placement from the
// members (protocol.Placement) and which copies count from Current, so
// they agree on both without talking to each other. Current changes in
// two ways: the proposer of the next view derives it from the previous
// one (NextCurrent), and a node that finished a copy (a re-replication, a
// returning node's catch-up) adds itself under the same view number
// (Member.UpdateCurrent). With one replica, Current is empty and the
// record is what it always was.
type View struct {
	Number   uint64
	Members  []protocol.NodeID // sorted, no duplicates
	Replicas int               // 0 or 1: one copy of each page (no Current)
	Current  map[protocol.NodeID]protocol.NodeSet
	// Rolling are the nodes that must roll their transaction records
	// (on their disks) forward before any node's workers run: every
	// member of a view whose processes all died, put there by the first
	// node to start after it (Restart); each takes itself out once its
	// rolls are acknowledged (Member.Rolled). The proposer of a view
	// copies it forward.
	Rolling protocol.NodeSet
}

// Has reports whether id is a member of v.
func (v View) Has(id protocol.NodeID) bool {
	_, ok := slices.BinarySearch(v.Members, id)
	return ok
}

// Live is the members as a set.
func (v View) Live() protocol.NodeSet {
	var s protocol.NodeSet
	for _, id := range v.Members {
		s.Add(id)
	}
	return s
}

// String formats v as "view 7 {0 2}" (with replicas, "view 7 {0 2}
// current 0:{0 2} 2:{2}").
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
	if !v.Rolling.Empty() {
		fmt.Fprintf(&b, " rolling %v", v.Rolling)
	}
	if v.Replicas > 1 {
		b.WriteString(" current")
		for _, d := range slices.Sorted(maps.Keys(v.Current)) {
			fmt.Fprintf(&b, " %d:%v", d, v.Current[d])
		}
	}
	return b.String()
}

// NextCurrent is the record of current copies for a view of members live
// that follows prev (docs/replication.md, "Processes"), the simulator's
// place() as a pure function:
//   - a directory never seen before (a member without an entry) counts
//     its own node alone: its backup is copied to in the background;
//   - a directory with no live current holder (both copies lost), or whose
//     new primary does not hold its current copies (a node that returns:
//     it catches up first, and adds itself once it did), keeps its record;
//   - otherwise only its primary and, if it held them, its backup stay
//     current: a node that is neither gets no more writes.
func NextCurrent(prev map[protocol.NodeID]protocol.NodeSet, live protocol.NodeSet) map[protocol.NodeID]protocol.NodeSet {
	next := make(map[protocol.NodeID]protocol.NodeSet, len(prev)+1)
	for d, cur := range prev {
		next[d] = cur
		p, b, hb, ok := protocol.Placement(d, live, 2)
		avail := intersect(cur, live)
		if !ok || avail.Empty() || !cur.Has(p) {
			continue
		}
		var keep protocol.NodeSet
		keep.Add(p)
		if hb && cur.Has(b) {
			keep.Add(b)
		}
		next[d] = keep
	}
	live.Each(func(d protocol.NodeID) {
		if _, ok := next[d]; !ok {
			var own protocol.NodeSet
			own.Add(d)
			next[d] = own
		}
	})
	return next
}

func intersect(a, b protocol.NodeSet) protocol.NodeSet {
	for i := range a {
		a[i] &= b[i]
	}
	return a
}

// wireView is the view key's JSON. Members are ints, not NodeIDs: a slice
// of a uint8 type would be encoded as a base64 string.
type wireView struct {
	Number   uint64           `json:"number"`
	Members  []int            `json:"members"`
	Replicas int              `json:"replicas,omitempty"`
	Current  map[string][]int `json:"current,omitempty"`
	Rolling  []int            `json:"rolling,omitempty"`
}

func encodeView(v View) (string, error) {
	w := wireView{Number: v.Number, Members: make([]int, len(v.Members))}
	for i, id := range v.Members {
		w.Members[i] = int(id)
	}
	v.Rolling.Each(func(id protocol.NodeID) { w.Rolling = append(w.Rolling, int(id)) })
	if v.Replicas > 1 {
		w.Replicas = v.Replicas
		w.Current = map[string][]int{}
		for d, s := range v.Current {
			hs := []int{}
			s.Each(func(h protocol.NodeID) { hs = append(hs, int(h)) })
			w.Current[strconv.Itoa(int(d))] = hs
		}
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
	for _, id := range w.Rolling {
		if id < 0 || id >= protocol.MaxNodes {
			return View{}, fmt.Errorf("membership: decoding view %q: rolling node id %d out of range", b, id)
		}
		v.Rolling.Add(protocol.NodeID(id))
	}
	switch {
	case w.Replicas < 0 || w.Replicas > 2:
		return View{}, fmt.Errorf("membership: decoding view %q: %d replicas, want 1 or 2", b, w.Replicas)
	case w.Replicas <= 1 && len(w.Current) > 0:
		return View{}, fmt.Errorf("membership: decoding view %q: current copies without replicas", b)
	}
	if w.Replicas > 1 {
		v.Replicas = w.Replicas
		v.Current = map[protocol.NodeID]protocol.NodeSet{}
		for ds, hs := range w.Current {
			d, err := strconv.Atoi(ds)
			if err != nil || d < 0 || d >= protocol.MaxNodes || strconv.Itoa(d) != ds {
				return View{}, fmt.Errorf("membership: decoding view %q: directory %q is not a node id", b, ds)
			}
			var s protocol.NodeSet
			for _, h := range hs {
				if h < 0 || h >= protocol.MaxNodes {
					return View{}, fmt.Errorf("membership: decoding view %q: directory %d: node id %d out of range", b, d, h)
				}
				s.Add(protocol.NodeID(h))
			}
			v.Current[protocol.NodeID(d)] = s
		}
	}
	return v, nil
}
