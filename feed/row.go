package feed

import (
	"fmt"
	"math"
	"math/rand/v2"
	"unicode/utf8"

	"storelink"
)

// The limits of a feed's fields.
const (
	maxQuantity      = 1_000_000
	maxArticleNumber = 64  // runes
	maxText          = 255 // runes, for the optional text columns
)

// textColumns are the optional free-text columns, checked for length and
// control characters.
var textColumns = [...]int{colLocation, colProductName, colProductNumber, colColor, colSize}

// hasControl reports whether s holds a control character other than tab
// (storelink.IsControl), and, when breaks, other than CR and LF. s is
// valid UTF-8 (the decoder saw to it), so a byte scan finds C1 controls as
// 0xC2 followed by 0x80 to 0x9F. The free-text columns take line breaks,
// which the feed format allows inside quoted fields (a location on two lines,
// a product name); an article number, an id, does not.
func hasControl(s string, breaks bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 0x20 && c < 0x7f || c > 0xc2:
		case c == '\t', breaks && (c == '\n' || c == '\r'):
		case c == 0xc2:
			if i+1 < len(s) && s[i+1] < 0xa0 {
				return true
			}
		case c >= 0x80: // a lead byte below 0xC2 or a continuation byte
		default:
			return true
		}
	}
	return false
}

// row checks one data record and puts it when it is valid. Every problem of
// the row is reported, so that a partner fixes the export in one go, but the
// row counts once as rejected.
func (c *checker) row(rec []string, line int) error {
	h := &c.h
	if len(rec) != h.fields {
		c.col.add(storelink.ProblemColumnsMismatch, h.mismatch, false, c.ref(rec, line))
		c.errs.problem(storelink.ProblemColumnsMismatch, h.mismatch)
		c.errs.dropped(rec, line)
		c.rep.RowsRejected++
		return nil
	}
	var v [numColumns]string
	for col, i := range h.idx {
		if i >= 0 {
			v[col] = trim(rec[i])
		}
	}
	ref := storelink.LineRef{LineNumber: line, StoreID: v[colStore], EAN: v[colEAN]}
	bad := false
	// fail records a problem of the row; value is the field's value that
	// caused it, "" when it is of no one value.
	fail := func(typ, msg, value string) {
		bad = true
		r := ref
		r.Value = value
		c.col.add(typ, msg, false, r)
		c.errs.problem(typ, msg)
	}
	for col := range numMandatory {
		if v[col] == "" {
			fail(storelink.ProblemMissingValues, h.missing[col], "")
		}
	}

	store, storeOK := c.store(v[colStore])
	if !storeOK && v[colStore] != "" {
		fail(storelink.ProblemUnknownStore, msgUnknownStore, v[colStore])
	}
	ean, eanOK := eanValue(v[colEAN])
	if !eanOK && v[colEAN] != "" {
		fail(storelink.ProblemInvalidValue, h.invalid[colEAN], v[colEAN])
	}
	if s := v[colArticleNumber]; len(s) > maxArticleNumber && utf8.RuneCountInString(s) > maxArticleNumber {
		fail(storelink.ProblemInvalidValue, h.invalid[colArticleNumber], s)
	} else if hasControl(s, false) {
		fail(storelink.ProblemInvalidValue, h.control[colArticleNumber], s)
	}
	qty, qtyOK := parseQuantity(v[colQuantity])
	if !qtyOK && v[colQuantity] != "" {
		fail(storelink.ProblemInvalidValue, h.invalid[colQuantity], v[colQuantity])
	}
	price, err := storelink.ParseMoney(v[colPrice])
	priceOK := err == nil && price > 0
	if !priceOK && v[colPrice] != "" {
		fail(storelink.ProblemInvalidValue, h.invalid[colPrice], v[colPrice])
	}
	var retail storelink.Money
	hasRetail := v[colRetailPrice] != ""
	if hasRetail {
		if retail, err = storelink.ParseMoney(v[colRetailPrice]); err != nil {
			fail(storelink.ProblemInvalidValue, h.invalid[colRetailPrice], v[colRetailPrice])
		} else if priceOK && retail < price {
			fail(storelink.ProblemMinimumPrice, msgMinimumPrice, v[colRetailPrice])
		}
	}
	for _, col := range textColumns {
		if s := v[col]; len(s) > maxText && utf8.RuneCountInString(s) > maxText {
			fail(storelink.ProblemInvalidValue, h.invalid[col], s)
		} else if hasControl(s, true) {
			fail(storelink.ProblemInvalidValue, h.control[col], s)
		}
	}
	if bad {
		c.errs.dropped(rec, line)
		c.rep.RowsRejected++
		return nil
	}

	c.rep.RowsValid++
	k := rowKey{store: store, ean: ean}
	prev := c.seen.swap(k, uint32(min(line, math.MaxUint32)))
	if prev != 0 {
		c.col.duplicate(int(prev), v[colStore], v[colEAN])
	}
	row := storelink.StockRow{
		StoreID:         v[colStore],
		EAN:             v[colEAN],
		ArticleNumber:   v[colArticleNumber],
		Quantity:        qty,
		Price:           price,
		ArticleLocation: v[colLocation],
		ProductName:     v[colProductName],
		ProductNumber:   v[colProductNumber],
		ArticleColor:    v[colColor],
		ArticleSize:     v[colSize],
		Line:            line,
		Repeats:         prev != 0,
	}
	if hasRetail {
		row.RetailPrice = c.retailPrice(retail)
	}
	if err := c.put(row); err != nil {
		return fmt.Errorf("put stock row of line %d: %w", line, err)
	}
	return nil
}

// parseQuantity reads digits only: no sign, no decimals, no separators, at
// most maxQuantity. Leading zeros are harmless and allowed.
func parseQuantity(s string) (int, bool) {
	if s == "" {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		d := s[i] - '0'
		if d > 9 {
			return 0, false
		}
		if n = n*10 + int(d); n > maxQuantity {
			return 0, false
		}
	}
	return n, true
}

// eanValue checks s as storelink.ValidGTIN does and returns it packed for rowKey: the
// digits' value, with the length in the top byte.
func eanValue(s string) (uint64, bool) {
	switch len(s) {
	case 8, 12, 13, 14:
	default:
		return 0, false
	}
	// GS1: weights 3 and 1 alternate from the right, the check digit
	// (rightmost) having 1; the weighted sum is then a multiple of 10. The
	// first digit has weight 3 when the length is even.
	w := 1 + 2*(1-len(s)%2)
	var v uint64
	sum := 0
	for i := 0; i < len(s); i++ {
		d := s[i] - '0'
		if d > 9 {
			return 0, false
		}
		v = v*10 + uint64(d)
		sum += w * int(d)
		w = 4 - w
	}
	return v | uint64(len(s))<<56, sum%10 == 0
}

// lineTable remembers, per store and EAN, the line of the last valid row, to
// find the rows a later one overrides. It stands in for a Go map because the
// map is a large share of Check's time (it hashes twice per row, a lookup
// and then a store, and grows through larger slots); this table hashes once
// with two multiplications and keeps 16 bytes per key.
//
// Keys come from the partner, so the hash multipliers are random per table
// (multiply-shift hashing, universal for a random odd multiplier): a file
// cannot be crafted to collide and make probing quadratic. An xor-fold and a
// second multiply spread dense runs of EANs, which plain multiply-shift
// clusters under linear probing.
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
	h := k.ean*t.a1 + uint64(k.store)*t.a2
	h ^= h >> 32
	return int((h * t.a1) >> t.shift)
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
