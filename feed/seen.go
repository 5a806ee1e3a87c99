package feed

import "math/rand/v2"

// lineTable remembers, per store and EAN, the line of the last valid row, to
// find the rows a later one overrides. It stands in for a Go map because the
// map was measured at over a quarter of Check's time (it hashes twice per row,
// a lookup and then a store, and grows through larger slots); this table
// hashes once with two multiplications and keeps 16 bytes per key.
//
// Keys come from the partner, so the hash multipliers are random per table:
// a file cannot be crafted to collide and make probing quadratic
// (multiply-shift hashing with a random odd multiplier is universal).
type lineTable struct {
	slots  []lineSlot
	n      int    // used slots
	shift  uint   // 64 - log2(len(slots))
	a1, a2 uint64 // random odd multipliers
}

// lineSlot is one entry; line 0 marks it free (data rows start at line 2).
type lineSlot struct {
	ean   uint64
	store uint32
	line  uint32
}

const minTableBits = 10

func newLineTable() *lineTable {
	return &lineTable{
		slots: make([]lineSlot, 1<<minTableBits),
		shift: 64 - minTableBits,
		a1:    rand.Uint64() | 1,
		a2:    rand.Uint64() | 1,
	}
}

// swap sets the line of a key and returns the line it had, 0 when new.
func (t *lineTable) swap(k rowKey, line uint32) uint32 {
	if 4*(t.n+1) > 3*len(t.slots) {
		t.grow()
	}
	mask := len(t.slots) - 1
	for i := t.index(k); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.line == 0 {
			*s = lineSlot{ean: k.ean, store: k.store, line: line}
			t.n++
			return 0
		}
		if s.ean == k.ean && s.store == k.store {
			prev := s.line
			s.line = line
			return prev
		}
	}
}

func (t *lineTable) index(k rowKey) int {
	return int((k.ean*t.a1 + uint64(k.store)*t.a2) >> t.shift)
}

// len is the number of distinct keys.
func (t *lineTable) len() int { return t.n }

// grow doubles the table and places every key again.
func (t *lineTable) grow() {
	old := t.slots
	t.slots = make([]lineSlot, 2*len(old))
	t.shift--
	mask := len(t.slots) - 1
	for _, s := range old {
		if s.line == 0 {
			continue
		}
		i := t.index(rowKey{store: s.store, ean: s.ean})
		for t.slots[i].line != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = s
	}
}
