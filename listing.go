package storelink

import (
	"encoding/base64"
	"strings"
	"unicode/utf8"
)

// The operator's lists of partners and clients page by their sort key
// (partners by name and id, clients by partner id and country code); a
// cursor is that key, opaque to callers, made by the page before. Both lists
// search with Q: a part of a name or id, matched without regard to the case
// of the letters A to Z (other letters match as written), so that both
// databases find the same rows.

// PartnerFilter selects partners ordered by name, then id, bytewise. After
// is the NextCursor of the page before.
type PartnerFilter struct {
	Q     string
	Limit int
	After string
}

// PartnerPage is a page of partners; NextCursor is "" on the last.
type PartnerPage struct {
	Partners   []Partner `json:"partners"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

// ClientFilter selects clients ordered by partner id, then country code,
// bytewise: of one partner when PartnerID is set, and matching Q in the
// client id, the country code, the partner id or the partner's name.
type ClientFilter struct {
	PartnerID string
	Q         string
	Limit     int
	After     string
}

// ClientListing is a client as the operator's list shows it: with the name
// of its partner.
type ClientListing struct {
	Client
	PartnerName string `json:"partner_name"`
}

// ClientPage is a page of clients; NextCursor is "" on the last.
type ClientPage struct {
	Clients    []ClientListing `json:"clients"`
	NextCursor string          `json:"next_cursor,omitempty"`
}

// ClientSummary is a client as the operator's overview shows it: the
// figures that tell whether it needs a look.
type ClientSummary struct {
	ClientListing
	Stores int
	// Endpoints counts its endpoints that are not deleted, and
	// EndpointsDisabled those of them that are disabled.
	Endpoints         int
	EndpointsDisabled int
	// FailedDeliveries counts the deliveries to its endpoints (not
	// deleted) that failed for good and have not been sent again.
	FailedDeliveries int
	// RejectedUploads counts its uploads received in the StatsWindow
	// before now that were rejected.
	RejectedUploads int
	// LastUpload is its latest upload, nil for none; only the id, client
	// id, file name, size, status and received time are set.
	LastUpload *Upload
	Capacity   Capacity
}

// CapacityExhausted tells whether less than a tenth of the client's upload
// capacity is left: its next files are likely refused (429) until the
// bucket refills.
func (s ClientSummary) CapacityExhausted() bool {
	return s.Capacity.BytesPerWindow > 0 && s.Capacity.BytesLeft*10 < s.Capacity.BytesPerWindow
}

// EndpointFilter selects a page of a client's endpoints that are not
// deleted, ordered as they were made (created_at, then id). After is the
// NextCursor of the page before.
type EndpointFilter struct {
	ClientID string
	Limit    int
	After    string
}

// EndpointPage is a page of a client's endpoints with their stats;
// NextCursor is "" on the last.
type EndpointPage struct {
	Endpoints  []EndpointDetail `json:"endpoints"`
	NextCursor string           `json:"next_cursor,omitempty"`
}

// ListCursor is the key of the last row of a page: the partner's name and
// id, the client's partner id and country code, or the endpoint's
// creation time and id.
type ListCursor struct{ First, Second string }

// String encodes the cursor for a next_cursor.
func (c ListCursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(c.First + "\x00" + c.Second))
}

// ParseListCursor reads a cursor that String made; param names the
// parameter for the error. Errors: EINVALID (CursorError).
func ParseListCursor(param, s string) (ListCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	first, second, ok := strings.Cut(string(b), "\x00")
	if err != nil || !ok || second == "" || strings.ContainsRune(second, 0) || !utf8.Valid(b) {
		return ListCursor{}, CursorError(param, s)
	}
	return ListCursor{first, second}, nil
}

// FoldQuery is a search text as the lists match it: trimmed, its letters A
// to Z made lower case, the only folding that both databases' lower()
// share.
func FoldQuery(q string) string {
	b := []byte(strings.TrimSpace(q))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
