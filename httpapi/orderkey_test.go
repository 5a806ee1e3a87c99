package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"storelink"
)

// keyCall sends a create call with an Idempotency-Key (none when key is
// nil) and returns the answer.
func keyCall(a *api, path, body string, key *string) (*http.Response, []byte) {
	a.t.Helper()
	h := map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "application/json"}
	if key != nil {
		h["Idempotency-Key"] = *key
	}
	return a.do("POST", path, strings.NewReader(body), h)
}

func ptr(s string) *string { return &s }

// wantCreated checks a create call's 201, its Location (a replay's the
// same as the first answer's: the order's) and whether it was a replay,
// and returns the order.
func wantCreated(t *testing.T, resp *http.Response, b []byte, replayed bool) storelink.Order {
	t.Helper()
	if resp.StatusCode != 201 {
		t.Fatalf("create = %d %s, want 201", resp.StatusCode, b)
	}
	if got, want := resp.Header.Get("Idempotent-Replayed"), map[bool]string{true: "true"}[replayed]; got != want {
		t.Fatalf("Idempotent-Replayed = %q, want %q", got, want)
	}
	var o storelink.Order
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Get("Location"); got != "/orders/"+o.ID {
		t.Fatalf("Location = %q, want /orders/%s", got, o.ID)
	}
	return o
}

// wantProblem checks a problem answer's status and that its detail says
// what it should.
func wantProblem(t *testing.T, resp *http.Response, b []byte, status int, detail string) {
	t.Helper()
	var p struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}
	if resp.StatusCode != status || resp.Header.Get("Content-Type") != "application/problem+json" ||
		json.Unmarshal(b, &p) != nil || p.Status != status || !strings.Contains(p.Detail, detail) {
		t.Fatalf("answer = %d %s %s, want a %d problem saying %q", resp.StatusCode, resp.Header.Get("Content-Type"), b, status, detail)
	}
}

func TestOrderIdempotencyKey(t *testing.T) {
	a := newAPI(t, apiOptions{})
	putStock(a, "S1;"+ean1+";SKU-1;10;19.99;Dept 3")
	c := a.ClientID
	body := newOrderBody(c, "MP-1", "", ean1, ean1)

	resp, b := keyCall(a, "/orders", body, ptr("8e03978e-40d5-43e8-bc93-6894a57f9324"))
	first := wantCreated(t, resp, b, false)
	firstBody := string(b)
	before := snapshot(a)
	if before.events != 1 {
		t.Fatalf("%d events after one order, want 1", before.events)
	}

	t.Run("a retry answers the same order and writes nothing", func(t *testing.T) {
		// The same request spelled differently (fields in another order,
		// spaces), and the key as a Structured Field string, as the draft
		// writes it.
		respaced := fmt.Sprintf(`{ "items": %s, "client_id": %q, "order_number": "MP-1" }`, items(ean1, ean1), c)
		for _, key := range []string{"8e03978e-40d5-43e8-bc93-6894a57f9324", `"8e03978e-40d5-43e8-bc93-6894a57f9324"`} {
			for _, body := range []string{body, respaced} {
				resp, b := keyCall(a, "/orders", body, &key)
				if o := wantCreated(t, resp, b, true); o.ID != first.ID {
					t.Fatalf("retry answered order %s, want %s", o.ID, first.ID)
				}
				if string(b) != firstBody {
					t.Fatalf("retry answered\n%s\nthe first call\n%s", b, firstBody)
				}
			}
		}
		before.same(t, snapshot(a))
		if s := stockRow(a, "S1", ean1); s.Reserved != 2 {
			t.Fatalf("after retries %d units are reserved, want 2", s.Reserved)
		}
	})

	t.Run("the same key with another request is 422", func(t *testing.T) {
		key := ptr("8e03978e-40d5-43e8-bc93-6894a57f9324")
		resp, b := keyCall(a, "/orders", newOrderBody(c, "MP-1", "", ean1), key)
		wantProblem(t, resp, b, 422, "was already used for a different request")
		resp, b = keyCall(a, "/warehouse-orders", body, key)
		wantProblem(t, resp, b, 422, "was already used for a different request")
		before.same(t, snapshot(a))
	})

	t.Run("a malformed key is 400", func(t *testing.T) {
		for _, key := range []string{"", strings.Repeat("k", 256), "ключ", `"a\b"`, `"a"b"`, `""`} {
			resp, b := keyCall(a, "/orders", newOrderBody(c, "MP-9", "", ean1), &key)
			wantProblem(t, resp, b, 400, "Idempotency-Key")
		}
		req, _ := http.NewRequest("POST", a.URL+"/orders", strings.NewReader(newOrderBody(c, "MP-9", "", ean1)))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Add("Idempotency-Key", "k1")
		req.Header.Add("Idempotency-Key", "k2")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		wantProblem(t, resp, b, 400, "one Idempotency-Key header")
		before.same(t, snapshot(a))
	})

	t.Run("without the header every call is a new order", func(t *testing.T) {
		one := created(a, "/orders", body, nil, false)
		two := created(a, "/orders", body, nil, false)
		if one.ID == two.ID || one.ID == first.ID {
			t.Fatal("calls without a key answered the same order")
		}
	})

	t.Run("warehouse orders", func(t *testing.T) {
		wbody := newOrderBody(c, "MP-W", "", ean1)
		w := created(a, "/warehouse-orders", wbody, ptr("w-1"), false)
		events := len(pullEvents(a, 1000))
		if again := created(a, "/warehouse-orders", wbody, ptr("w-1"), true); again.ID != w.ID {
			t.Fatalf("warehouse retry answered order %s, want %s", again.ID, w.ID)
		}
		if got := len(pullEvents(a, 1000)); got != events {
			t.Fatalf("a warehouse retry wrote events: %d before, %d after", events, got)
		}
	})

	t.Run("a refused call leaves its key unused", func(t *testing.T) {
		nb := newOrderBody(c, "MP-N", "", eanNoStock)
		resp, b := keyCall(a, "/orders", nb, ptr("n-1"))
		wantProblem(t, resp, b, 409, "No store")
		putStock(a, "S2;"+eanNoStock+";SKU-N;1;5.00;Back")
		o := created(a, "/orders", nb, ptr("n-1"), false)
		if o.StoreID != "S2" {
			t.Fatalf("order after the stock came = %+v, want it at S2", o)
		}
	})
}

// created sends a create call that must answer 201, a replay or not.
func created(a *api, path, body string, key *string, replayed bool) storelink.Order {
	a.t.Helper()
	resp, b := keyCall(a, path, body, key)
	return wantCreated(a.t, resp, b, replayed)
}
