package storelink

import (
	"encoding/base64"
	"strings"
	"unicode/utf8"
)

// The stock listing pages by (store, EAN); its cursor is that pair, opaque
// to partners, and the same whichever store made it.

// StockPage cuts rows (read with one row more than limit) to a page and
// returns the cursor of the next page, "" when this is the last.
func StockPage(rows []Stock, limit int) ([]Stock, string) {
	if len(rows) <= limit {
		return rows, ""
	}
	rows = rows[:limit]
	last := rows[len(rows)-1]
	return rows, base64.RawURLEncoding.EncodeToString([]byte(last.StoreID + "\x00" + last.EAN))
}

// ParseStockCursor reads a cursor made by StockPage. Errors: EINVALID.
func ParseStockCursor(c string) (store, ean string, err error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	store, ean, ok := strings.Cut(string(b), "\x00")
	if err != nil || !ok || !utf8.ValidString(store+ean) || strings.ContainsRune(ean, 0) {
		return "", "", Errorf(EINVALID, "after is not a cursor returned by this call.")
	}
	return store, ean, nil
}

// CursorError is the answer to a paging parameter (after, before) that is
// not a cursor the listing made: a 400, as a garbage filter is, rather than
// an empty page that would read as the end of the list.
func CursorError(param, value string) *Error {
	if len(value) > 64 {
		value = value[:64]
	}
	return Errorf(EINVALID, "%s %q is not a cursor returned by this call.", param, value)
}
