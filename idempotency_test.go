package storelink_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"storelink"
)

func TestCheckIdempotencyKey(t *testing.T) {
	for _, c := range []struct {
		key string
		ok  bool
	}{
		{"k", true}, {"8e03978e-40d5-43e8-bc93-6894a57f9324", true}, {"a key ~!", true},
		{strings.Repeat("k", 255), true}, {strings.Repeat("k", 256), false},
		{"", false}, {"tab\t", false}, {"nul\x00", false}, {"del\x7f", false}, {"ключ", false},
	} {
		err := storelink.CheckIdempotencyKey(c.key)
		if (err == nil) != c.ok || err != nil && storelink.ErrorCode(err) != storelink.EINVALID {
			t.Errorf("CheckIdempotencyKey(%q) = %v, want ok %v", c.key, err, c.ok)
		}
	}
}

// The request hash is of the values, not of the JSON's spelling, and of the
// call; the key is not part of it.
func TestRequestHash(t *testing.T) {
	decode := func(body string) *storelink.NewOrder {
		t.Helper()
		var n storelink.NewOrder
		if err := json.Unmarshal([]byte(body), &n); err != nil {
			t.Fatal(err)
		}
		return &n
	}
	a := decode(`{"order_number":"1","client_id":"c","items":[{"ean":"4006381333931","marketplace_article_number":"M","price":5}]}`)
	b := decode(`{ "items": [ {"price": 5.00, "marketplace_article_number": "M", "ean": "4006381333931"} ], "client_id": "c", "order_number": "1" }`)
	b.IdempotencyKey = "k"
	if !bytes.Equal(a.RequestHash(storelink.CreateOrderCall), b.RequestHash(storelink.CreateOrderCall)) {
		t.Error("the same values spelled differently hash differently")
	}
	if bytes.Equal(a.RequestHash(storelink.CreateOrderCall), a.RequestHash(storelink.CreateWarehouseOrderCall)) {
		t.Error("the two create calls hash the same body alike")
	}
	c := decode(`{"order_number":"1","client_id":"c","items":[{"ean":"4006381333931","marketplace_article_number":"M","price":5.01}]}`)
	if bytes.Equal(a.RequestHash(storelink.CreateOrderCall), c.RequestHash(storelink.CreateOrderCall)) {
		t.Error("another price hashes the same")
	}
}

func TestOrderKeyLive(t *testing.T) {
	at := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	k := storelink.OrderKey{CreatedAt: at}
	if !k.Live(at.Add(storelink.IdempotencyKeyTTL-time.Millisecond)) || k.Live(at.Add(storelink.IdempotencyKeyTTL)) {
		t.Errorf("a key is live for %s and no longer", storelink.IdempotencyKeyTTL)
	}
}
