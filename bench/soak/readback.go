package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"time"
)

// The checker reads back what the service says, after the drain, through
// the same API (any serve; nothing is failing any more).

// uploadJSON is an upload as the service reports it.
type uploadJSON struct {
	ID            string     `json:"upload_id"`
	FileName      string     `json:"file_name"`
	SHA256        string     `json:"sha256"`
	Status        string     `json:"status"`
	StartedAt     *time.Time `json:"started_at"`
	FinishedAt    *time.Time `json:"finished_at"`
	RowsTotal     int        `json:"rows_total"`
	RowsApplied   int        `json:"rows_applied"`
	RowsUnchanged int        `json:"rows_unchanged"`
	RowsRejected  int        `json:"rows_rejected"`
	Errors        []struct {
		Type string `json:"type"`
	} `json:"errors"`
}

// stockJSON is a row of the stock in force.
type stockJSON struct {
	StoreID  string       `json:"store_id"`
	EAN      string       `json:"ean"`
	Article  string       `json:"article_number"`
	Quantity int          `json:"quantity"`
	Price    json.Number  `json:"price"`
	Retail   *json.Number `json:"retail_price"`
	Reserved int          `json:"reserved"`
	UploadID string       `json:"upload_id"`
}

// eventJSON is the part of an event the checker compares.
type eventJSON struct {
	EventID   string `json:"event_id"`
	OrderID   string `json:"order_id"`
	State     string `json:"state"`
	Timestamp string `json:"timestamp"`
	Items     []struct {
		ItemID string `json:"item_id"`
	} `json:"items"`
	CancelledItems []struct {
		ItemID string `json:"item_id"`
	} `json:"cancelled_items"`
	raw json.RawMessage
}

// deliveryJSON is a delivery as the operator API lists it.
type deliveryJSON struct {
	ID       string `json:"delivery_id"`
	EventID  string `json:"event_id"`
	OrderID  string `json:"order_id"`
	UploadID string `json:"upload_id"`
	State    string `json:"state"`
	// Attempts counts the attempts listed.
	Attempts attemptCount `json:"attempts"`
}

// attemptCount reads a delivery's attempts as their number.
type attemptCount int

func (n *attemptCount) UnmarshalJSON(b []byte) error {
	var list []json.RawMessage
	if err := json.Unmarshal(b, &list); err != nil {
		return err
	}
	*n = attemptCount(len(list))
	return nil
}

type reader struct {
	s   *soak
	ctx context.Context
	rng *rand.Rand
}

func (r reader) get(kind, path string, v any, headers ...string) error {
	a, err := r.s.api.admin(r.ctx, r.rng, kind, "GET", path, nil, 60*time.Second, headers...)
	if err != nil {
		return err
	}
	return a.decode(v)
}

// uploads lists the client's uploads in acceptance order (oldest first).
func (r reader) uploads(c *clientModel) ([]uploadJSON, error) {
	var all []uploadJSON
	before := ""
	for range 10000 {
		var page struct {
			Uploads    []uploadJSON `json:"uploads"`
			NextBefore string       `json:"next_before"`
		}
		if err := r.get("read", "/stock/"+c.id+"/uploads?limit=500&before="+url.QueryEscape(before), &page, "x-api-key", c.apiKey); err != nil {
			return nil, err
		}
		all = append(all, page.Uploads...)
		if page.NextBefore == "" {
			break
		}
		before = page.NextBefore
	}
	for i, j := 0, len(all)-1; i < j; i, j = i+1, j-1 {
		all[i], all[j] = all[j], all[i]
	}
	return all, nil
}

// stock lists the client's stock in force.
func (r reader) stock(c *clientModel) ([]stockJSON, error) {
	var all []stockJSON
	after := ""
	for range 10000 {
		var page struct {
			Stock      []stockJSON `json:"stock"`
			NextCursor string      `json:"next_cursor"`
		}
		if err := r.get("read", "/stock/"+c.id+"/stock?limit=1000&after="+url.QueryEscape(after), &page, "x-api-key", c.apiKey); err != nil {
			return nil, err
		}
		all = append(all, page.Stock...)
		if page.NextCursor == "" {
			break
		}
		after = page.NextCursor
	}
	return all, nil
}

// orders lists the client's orders.
func (r reader) orders(c *clientModel) ([]orderJSON, error) {
	var all []orderJSON
	before := ""
	for range 10000 {
		var page struct {
			Orders     []orderJSON `json:"orders"`
			NextBefore string      `json:"next_before"`
		}
		if err := r.get("read", "/orders?limit=500&client_id="+c.id+"&before="+url.QueryEscape(before), &page); err != nil {
			return nil, err
		}
		all = append(all, page.Orders...)
		if page.NextBefore == "" {
			break
		}
		before = page.NextBefore
	}
	return all, nil
}

func parseEvents(raw []json.RawMessage) ([]eventJSON, error) {
	out := make([]eventJSON, len(raw))
	for i, m := range raw {
		if err := json.Unmarshal(m, &out[i]); err != nil {
			return nil, fmt.Errorf("event %.200s: %w", m, err)
		}
		out[i].raw = m
	}
	return out, nil
}

// orderEvents lists an order's events, oldest first.
func (r reader) orderEvents(id string) ([]eventJSON, error) {
	var page struct {
		Events []json.RawMessage `json:"events"`
	}
	if err := r.get("read", "/orders/"+id+"/events", &page); err != nil {
		return nil, err
	}
	return parseEvents(page.Events)
}

// feed reads the client's pull feed from its start.
func (r reader) feed(c *clientModel) ([]eventJSON, error) {
	var all []eventJSON
	after := ""
	for range 100000 {
		var page struct {
			Events     []json.RawMessage `json:"events"`
			NextCursor string            `json:"next_cursor"`
		}
		if err := r.get("read", "/events/"+c.id+"?limit=1000&after="+url.QueryEscape(after), &page, "x-api-key", c.apiKey); err != nil {
			return nil, err
		}
		evs, err := parseEvents(page.Events)
		if err != nil {
			return nil, err
		}
		all = append(all, evs...)
		if len(page.Events) == 0 || page.NextCursor == "" || page.NextCursor == after {
			break
		}
		after = page.NextCursor
	}
	return all, nil
}

// deliveries lists an endpoint's deliveries.
func (r reader) deliveries(endpointID string) ([]deliveryJSON, error) {
	var all []deliveryJSON
	before := ""
	for range 10000 {
		var page struct {
			Deliveries []deliveryJSON `json:"deliveries"`
			NextBefore string         `json:"next_before"`
		}
		if err := r.get("read", "/admin/deliveries?limit=500&endpoint_id="+endpointID+"&before="+url.QueryEscape(before), &page); err != nil {
			return nil, err
		}
		all = append(all, page.Deliveries...)
		if page.NextBefore == "" {
			break
		}
		before = page.NextBefore
	}
	return all, nil
}
