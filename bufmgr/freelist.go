package bufmgr

// freeList is the set of free frames: a stack, so that the frame freed last
// is reused first, plus each frame's place in it, so that a particular frame
// (a page's home, see table.home) can be taken out in constant time.
type freeList struct {
	stack []int32
	pos   []int32 // pos[i]: where frame i is in stack; -1 while it is in use
}

func newFreeList(n int) freeList {
	l := freeList{stack: make([]int32, 0, n), pos: make([]int32, n)}
	for i := range l.pos {
		l.pos[i] = -1
	}
	return l
}

func (l *freeList) len() int { return len(l.stack) }

func (l *freeList) push(i int32) {
	if l.pos[i] >= 0 {
		panic("bufmgr: frame freed twice")
	}
	l.pos[i] = int32(len(l.stack))
	l.stack = append(l.stack, i)
}

// pop takes the frame freed last; -1 when none is free.
func (l *freeList) pop() int32 {
	if len(l.stack) == 0 {
		return -1
	}
	i := l.stack[len(l.stack)-1]
	l.stack = l.stack[:len(l.stack)-1]
	l.pos[i] = -1
	return i
}

// take takes frame i if it is free. The last frame of the stack fills its
// place, so the order of the others is kept except for that one.
func (l *freeList) take(i int32) bool {
	p := l.pos[i]
	if p < 0 {
		return false
	}
	last := l.stack[len(l.stack)-1]
	l.stack[p] = last
	l.pos[last] = p
	l.stack = l.stack[:len(l.stack)-1]
	l.pos[i] = -1
	return true
}
