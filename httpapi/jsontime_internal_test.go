package httpapi

import (
	"bytes"
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"storelink"
)

// EncodeJSON writes what encoding/json writes (with HTML left unescaped),
// but for times: a time whose milliseconds need three digits, in UTC, comes
// out the same; any other time comes out with exactly three.
func TestEncodeJSONAsEncodingJSON(t *testing.T) {
	at := time.Date(2026, 11, 21, 7, 54, 21, 123_000_000, time.UTC)
	code := storelink.ReturnReasonCode(3)
	values := []any{
		storelink.Order{ID: "o1", OrderNumber: "M<1>&", ClientID: "c", State: storelink.StateFulfilled,
			Items:                  []storelink.Item{{ItemID: "i", EAN: "4006381333931", Price: 1999, Currency: "EUR", ReturnReasonCode: &code}},
			CustomerBillingAddress: &storelink.Address{FirstName: "Ä", LastName: "\u2028"}, CreatedAt: at, UpdatedAt: at},
		storelink.Upload{ID: "u", Status: storelink.UploadApplied, ReceivedAt: at, StartedAt: &at, Errors: []storelink.Problem{}},
		storelink.Upload{ID: "nil slices and pointers", ReceivedAt: at},
		map[string]any{"z": 1, "a": []int(nil), "m": map[string]int{"b": 2, "a": 1}, "f": 0.1, "big": 1e21},
		struct {
			Raw json.RawMessage `json:"raw"`
			S   string          `json:"s,omitempty"`
		}{Raw: json.RawMessage(`{"x":1}`)},
	}
	for _, v := range values {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := EncodeJSON(&got, v); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("EncodeJSON = %s\nencoding/json = %s", got.String(), want.String())
		}
	}

	stamp := regexp.MustCompile(`"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"`)
	for _, at := range []time.Time{
		time.Date(2026, 11, 21, 5, 50, 20, 0, time.UTC),
		time.Date(2026, 11, 21, 5, 50, 24, 20_000_000, time.UTC),
		time.Date(2026, 11, 21, 5, 50, 24, 20_123_456, time.FixedZone("CET", 3600)),
		{},
	} {
		var b bytes.Buffer
		if err := EncodeJSON(&b, storelink.Upload{ReceivedAt: at, StartedAt: &at}); err != nil {
			t.Fatal(err)
		}
		if n := len(stamp.FindAllString(b.String(), -1)); n != 2 {
			t.Errorf("%v encodes as %s: %d timestamps with three digits, want 2", at, b.String(), n)
		}
	}
}
