package storelink

import (
	"bytes"
	"encoding/json"
	"time"
)

// EventTimeLayout is the timestamp of an event: UTC, milliseconds, Z.
const EventTimeLayout = "2006-01-02T15:04:05.000Z"

// Event is the order event of the seed, field for field. Optional fields that
// have no value are omitted, never null.
type Event struct {
	EventID                string           `json:"event_id"`
	OrderID                string           `json:"order_id"`
	OrderNumber            string           `json:"order_number"`
	State                  OrderState       `json:"state"`
	StoreID                string           `json:"store_id,omitempty"`
	Timestamp              string           `json:"timestamp"`
	DeliveryDetails        *DeliveryDetails `json:"delivery_details,omitempty"`
	CustomerBillingAddress *Address         `json:"customer_billing_address,omitempty"`
	Items                  []EventItem      `json:"items"`
	CancelledItems         []EventItem      `json:"cancelled_items,omitempty"`
}

// EventItem is the seed's Item: an item as an event reports it.
type EventItem struct {
	ItemID                   string             `json:"item_id"`
	EAN                      string             `json:"ean"`
	Price                    Money              `json:"price"`
	Currency                 string             `json:"currency"`
	ArticleNumber            string             `json:"article_number"`
	MarketplaceArticleNumber string             `json:"marketplace_article_number"`
	ArticleLocation          string             `json:"article_location,omitempty"`
	ReturnReasonCode         *ReturnReasonCode  `json:"return_reason_code,omitempty"`
	ReturnLocation           ReturnLocation     `json:"return_location,omitempty"`
	CancellationReason       CancellationReason `json:"cancellation_reason,omitempty"`
}

// EventRecord is a stored event: the exact JSON that partners receive, with
// where it belongs. The payload is made once, when the event is written, so
// every delivery and every read sends the same bytes.
type EventRecord struct {
	EventID  string          `json:"event_id"`
	ClientID string          `json:"client_id"`
	OrderID  string          `json:"order_id"`
	State    OrderState      `json:"state"`
	Payload  json.RawMessage `json:"payload"`
	// Cursor is the position of the event among its client's events.
	Cursor    string    `json:"cursor"`
	CreatedAt time.Time `json:"created_at"`
}

// Marshal encodes an event as it is stored and sent: compact, and without
// the HTML escaping of <, > and & that would make "M&S" arrive as
// "M\u0026S".
func (e *Event) Marshal() []byte { return marshalEvent(e) }

func marshalEvent(e any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		panic(err) // an event has no field that can fail to encode
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// newEvent makes the event of o entering its current state with the given
// items. The store and addresses are the order's as they now stand.
func newEvent(o *Order, id string, now time.Time, storeID string, items, cancelled []Item) *Event {
	e := &Event{
		EventID: id, OrderID: o.ID, OrderNumber: o.OrderNumber, State: o.State, StoreID: storeID,
		Timestamp:              now.UTC().Format(EventTimeLayout),
		DeliveryDetails:        o.DeliveryDetails,
		CustomerBillingAddress: o.CustomerBillingAddress,
		Items:                  eventItems(items, o.State),
	}
	if len(cancelled) > 0 {
		e.CancelledItems = eventItems(cancelled, o.State)
	}
	return e
}

// eventItems reports items; return fields only on return events, the
// cancellation reason only where an item was cancelled.
func eventItems(items []Item, state OrderState) []EventItem {
	out := make([]EventItem, len(items))
	for i, it := range items {
		out[i] = EventItem{
			ItemID: it.ItemID, EAN: it.EAN, Price: it.Price, Currency: it.Currency, ArticleNumber: it.ArticleNumber,
			MarketplaceArticleNumber: it.MarketplaceArticleNumber, ArticleLocation: it.ArticleLocation,
		}
		if it.Status == ItemCancelled {
			out[i].CancellationReason = it.CancellationReason
		}
		if state == StateReturned || state == StateWarehouseReturned {
			out[i].ReturnReasonCode = it.ReturnReasonCode
			out[i].ReturnLocation = it.ReturnLocation
		}
	}
	return out
}

// EventUploadFinished is the kind of the event that tells a client's
// endpoints an upload of its stock ended (UploadEvent). It is not an order
// state: an endpoint receives it only when it names it among its states,
// beside the order states it wants, so that no endpoint receives it without
// asking, and an endpoint that names it alone receives no order event.
const EventUploadFinished OrderState = "stock_upload.finished"

// EndpointStates are what an endpoint's states may name: the six order
// states and EventUploadFinished.
var EndpointStates = append(append([]OrderState{}, OrderStates...), EventUploadFinished)

// UploadEvent tells that an upload ended: applied (RowsRejected tells
// whether some rows were dropped), rejected or cancelled. Its times are
// an order event's (EventTimeLayout).
type UploadEvent struct {
	EventID       string       `json:"event_id"`
	Type          OrderState   `json:"type"`
	ClientID      string       `json:"client_id"`
	UploadID      string       `json:"upload_id"`
	FileName      string       `json:"file_name"`
	Status        UploadStatus `json:"status"`
	RowsTotal     int          `json:"rows_total"`
	RowsApplied   int          `json:"rows_applied"`
	RowsUnchanged int          `json:"rows_unchanged"`
	RowsRejected  int          `json:"rows_rejected"`
	ReceivedAt    string       `json:"received_at"`
	FinishedAt    string       `json:"finished_at"`
	// StatusURL is where the upload's status and report are read.
	StatusURL string `json:"status_url"`
}

// NewUploadEvent makes the event of u, which has ended, under id.
func NewUploadEvent(u *Upload, id, statusURL string) *UploadEvent {
	e := &UploadEvent{
		EventID: id, Type: EventUploadFinished, ClientID: u.ClientID, UploadID: u.ID, FileName: u.FileName,
		Status: u.Status, RowsTotal: u.RowsTotal, RowsApplied: u.RowsApplied, RowsUnchanged: u.RowsUnchanged,
		RowsRejected: u.RowsRejected, ReceivedAt: u.ReceivedAt.UTC().Format(EventTimeLayout), StatusURL: statusURL,
	}
	if u.FinishedAt != nil {
		e.FinishedAt = u.FinishedAt.UTC().Format(EventTimeLayout)
	}
	return e
}

// Marshal encodes the event as it is stored and sent, as Event.Marshal
// does.
func (e *UploadEvent) Marshal() []byte { return marshalEvent(e) }
