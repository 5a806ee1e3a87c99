package feed

import (
	"container/heap"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"storelink"
)

// maxRefValue bounds the store and EAN copied into a line reference: they
// are there to help find the line, and a garbage field of a megabyte must not
// end up a thousand times in the report.
const maxRefValue = 64

// problemKey groups problems: one entry per type and message.
type problemKey struct{ typ, msg string }

// collector builds the report's problem lists. Problems keep the order in
// which they were first seen; line references stay in file order.
type collector struct {
	errs, warns []storelink.Problem
	index       map[problemKey]int // into errs or warns, by key
	// dups holds the overridden duplicate lines as a max-heap: they are found
	// out of order, and the MaxLineRefs kept must be the first in the file.
	dups     refHeap
	dupCount int
}

func newCollector() *collector {
	return &collector{
		errs:  []storelink.Problem{},
		warns: []storelink.Problem{},
		index: make(map[problemKey]int),
	}
}

// add records one line with a problem.
func (c *collector) add(typ, msg string, warn bool, ref storelink.LineRef) {
	list := &c.errs
	if warn {
		list = &c.warns
	}
	k := problemKey{typ, msg}
	i, ok := c.index[k]
	if !ok {
		i = len(*list)
		c.index[k] = i
		*list = append(*list, storelink.Problem{Type: typ, Message: msg, LineNumbers: []storelink.LineRef{}})
	}
	p := &(*list)[i]
	p.Count++
	if len(p.LineNumbers) < storelink.MaxLineRefs {
		ref.StoreID, ref.EAN = refValue(ref.StoreID), refValue(ref.EAN)
		ref.Value = cutRunes(ref.Value, storelink.MaxRefValue)
		p.LineNumbers = append(p.LineNumbers, ref)
	}
}

// fileError records a problem that rejects the whole file.
func (c *collector) fileError(typ, msg string, line int) {
	c.add(typ, msg, false, storelink.LineRef{LineNumber: line})
}

// duplicate records a valid row overridden by a later one. The refs are kept
// in a max-heap bounded at MaxLineRefs, so the earliest lines win the cap
// whatever the order in which overrides are found.
func (c *collector) duplicate(line int, store, ean string) {
	c.dupCount++
	if len(c.dups) == storelink.MaxLineRefs {
		if line >= c.dups[0].LineNumber {
			return
		}
		heap.Pop(&c.dups)
	}
	heap.Push(&c.dups, storelink.LineRef{LineNumber: line, StoreID: refValue(store), EAN: refValue(ean)})
}

// report finishes the problem lists into r.
func (c *collector) report(r *storelink.FeedReport) {
	if c.dupCount > 0 {
		refs := []storelink.LineRef(c.dups)
		slices.SortFunc(refs, func(a, b storelink.LineRef) int { return a.LineNumber - b.LineNumber })
		c.warns = append(c.warns, storelink.Problem{
			Type: storelink.ProblemDuplicated, Message: msgDuplicated,
			LineNumbers: refs, Count: c.dupCount,
		})
	}
	for _, list := range [][]storelink.Problem{c.errs, c.warns} {
		for i := range list {
			if p := &list[i]; p.Count > len(p.LineNumbers) {
				p.Details = "The first " + strconv.Itoa(len(p.LineNumbers)) + " of " +
					strconv.Itoa(p.Count) + " lines are listed."
			}
		}
	}
	r.Errors, r.Warnings = c.errs, c.warns
}

// refValue copies s, cut to maxRefValue bytes on a rune boundary, so that a
// reference does not pin the whole record it came from.
func refValue(s string) string {
	if len(s) > maxRefValue {
		n := maxRefValue
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	return strings.Clone(s)
}

// cutRunes copies the first n runes of s, so that a reference does not pin
// the whole record it came from. The decoder made s valid UTF-8; a byte
// that is not is counted as one rune, as a range over s counts it.
func cutRunes(s string, n int) string {
	if len(s) > n {
		for i := range s {
			if n == 0 {
				s = s[:i]
				break
			}
			n--
		}
	}
	return strings.Clone(s)
}

// refHeap is a max-heap of line references by line number.
type refHeap []storelink.LineRef

func (h refHeap) Len() int           { return len(h) }
func (h refHeap) Less(i, j int) bool { return h[i].LineNumber > h[j].LineNumber }
func (h refHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *refHeap) Push(x any)        { *h = append(*h, x.(storelink.LineRef)) }
func (h *refHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
