package feed

import (
	"fmt"
	"math"
	"unicode/utf8"

	"storelink"
)

// Limits of CONTRACT 3.4.
const (
	maxQuantity      = 1_000_000
	maxArticleNumber = 64  // runes
	maxText          = 255 // runes, for the optional text columns
)

// textColumns are the optional free-text columns, checked for length only.
var textColumns = [...]int{colLocation, colProductName, colProductNumber, colColor, colSize}

// row checks one data record and puts it when it is valid. Every problem of
// the row is reported, so that a partner fixes the export in one go, but the
// row counts once as rejected.
func (c *checker) row(rec []string, line int) error {
	h := &c.h
	if len(rec) != h.fields {
		c.col.add(storelink.ProblemColumnsMismatch, h.mismatch, false, c.ref(rec, line))
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
	fail := func(typ, msg string) {
		bad = true
		c.col.add(typ, msg, false, ref)
	}
	for col := range numMandatory {
		if v[col] == "" {
			fail(storelink.ProblemMissingValues, h.missing[col])
		}
	}

	store, storeOK := c.store(v[colStore])
	if !storeOK && v[colStore] != "" {
		fail(storelink.ProblemUnknownStore, msgUnknownStore)
	}
	ean, eanOK := eanValue(v[colEAN])
	if !eanOK && v[colEAN] != "" {
		fail(storelink.ProblemInvalidValue, h.invalid[colEAN])
	}
	if s := v[colArticleNumber]; len(s) > maxArticleNumber && utf8.RuneCountInString(s) > maxArticleNumber {
		fail(storelink.ProblemInvalidValue, h.invalid[colArticleNumber])
	}
	qty, qtyOK := parseQuantity(v[colQuantity])
	if !qtyOK && v[colQuantity] != "" {
		fail(storelink.ProblemInvalidValue, h.invalid[colQuantity])
	}
	price, err := storelink.ParseMoney(v[colPrice])
	priceOK := err == nil && price > 0
	if !priceOK && v[colPrice] != "" {
		fail(storelink.ProblemInvalidValue, h.invalid[colPrice])
	}
	var retail storelink.Money
	hasRetail := v[colRetailPrice] != ""
	if hasRetail {
		if retail, err = storelink.ParseMoney(v[colRetailPrice]); err != nil {
			fail(storelink.ProblemInvalidValue, h.invalid[colRetailPrice])
		} else if priceOK && retail < price {
			fail(storelink.ProblemMinimumPrice, msgMinimumPrice)
		}
	}
	for _, col := range textColumns {
		if s := v[col]; len(s) > maxText && utf8.RuneCountInString(s) > maxText {
			fail(storelink.ProblemInvalidValue, h.invalid[col])
		}
	}
	if bad {
		c.rep.RowsRejected++
		return nil
	}

	c.rep.RowsValid++
	k := rowKey{store: store, ean: ean}
	if prev := c.seen.swap(k, uint32(min(line, math.MaxUint32))); prev != 0 {
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

// ValidEAN reports whether s is a GTIN of 8, 12, 13 or 14 digits (EAN-8,
// UPC-A, EAN-13, GTIN-14) with a correct GS1 check digit. Exported because
// orders carry EANs too, and they must follow the same rule as the feed.
func ValidEAN(s string) bool {
	_, ok := eanValue(s)
	return ok
}

// eanValue checks s as ValidEAN does and returns it packed for rowKey: the
// digits' value, with the length in the top byte.
func eanValue(s string) (uint64, bool) {
	switch len(s) {
	case 8, 12, 13, 14:
	default:
		return 0, false
	}
	var v uint64
	sum := 0
	for i := 0; i < len(s); i++ {
		d := s[i] - '0'
		if d > 9 {
			return 0, false
		}
		v = v*10 + uint64(d)
		// GS1: weights 3 and 1 alternate from the right, the check digit
		// (rightmost) having 1; the weighted sum is then a multiple of 10.
		if (len(s)-1-i)%2 == 1 {
			sum += 3 * int(d)
		} else {
			sum += int(d)
		}
	}
	return v | uint64(len(s))<<56, sum%10 == 0
}
