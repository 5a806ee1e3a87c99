package storelink

import (
	"context"
	"strings"
	"time"
)

// OrderState is the state of an order, exactly as the seed names it; the
// state of an order event is the state the order entered.
type OrderState string

const (
	// StateNone is the state before an order exists.
	StateNone OrderState = ""
	// StateAssigned: the order has been assigned to a store.
	StateAssigned OrderState = "assigned"
	// StateCancelled: all items were cancelled by the store; the order is
	// cancelled for the customer.
	StateCancelled OrderState = "cancelled"
	// StateFulfilled: items were picked and completed in the store; the order
	// is ready to be shipped.
	StateFulfilled OrderState = "fulfilled"
	// StateReturned: some or all items of a store-fulfilled order came back.
	StateReturned OrderState = "returned"
	// StateWarehouseFulfilled: the marketplace's own warehouse completed it.
	StateWarehouseFulfilled OrderState = "marketplace_warehouse_fulfilled"
	// StateWarehouseReturned: items of a warehouse-fulfilled order came back
	// to the warehouse.
	StateWarehouseReturned OrderState = "marketplace_warehouse_returned"
)

// OrderStates lists the six states.
var OrderStates = []OrderState{StateAssigned, StateCancelled, StateFulfilled, StateReturned, StateWarehouseFulfilled, StateWarehouseReturned}

// transitions is the seed's transition table, the one every state change
// goes through. (None → marketplace_warehouse_fulfilled is the creation of
// a warehouse order, CreateWarehouseOrderCall; the seed leaves that entry
// open.)
var transitions = map[OrderState][]OrderState{
	StateNone:               {StateAssigned, StateWarehouseFulfilled},
	StateAssigned:           {StateCancelled, StateFulfilled},
	StateFulfilled:          {StateReturned},
	StateReturned:           {StateReturned},
	StateWarehouseFulfilled: {StateWarehouseReturned},
	StateWarehouseReturned:  {StateWarehouseReturned},
}

// CanTransition tells whether the table allows from → to.
func CanTransition(from, to OrderState) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Transition checks from → to; ECONFLICT naming the current state if not.
func Transition(from, to OrderState) error {
	if CanTransition(from, to) {
		return nil
	}
	if from == StateNone {
		return Errorf(ECONFLICT, "An order cannot start as %s.", to)
	}
	return Errorf(ECONFLICT, "The order is %s; an order that is %s cannot become %s.", from, from, to)
}

// ItemStatus is where one unit of an order stands.
type ItemStatus string

const (
	ItemAssigned  ItemStatus = "assigned"
	ItemCancelled ItemStatus = "cancelled"
	ItemFulfilled ItemStatus = "fulfilled"
	ItemReturned  ItemStatus = "returned"
)

// CancellationReason is one of the seed's cancellation reasons.
type CancellationReason string

const (
	ReasonItemBroken    CancellationReason = "ITEM_BROKEN"
	ReasonItemMissing   CancellationReason = "ITEM_MISSING"
	ReasonOutOfStock    CancellationReason = "OUT_OF_STOCK"
	ReasonUnknownReason CancellationReason = "UNKNOWN_REASON"
)

// Valid tells whether r is in the seed's table.
func (r CancellationReason) Valid() bool {
	switch r {
	case ReasonItemBroken, ReasonItemMissing, ReasonOutOfStock, ReasonUnknownReason:
		return true
	}
	return false
}

// Reassignable tells whether an item cancelled for r may go to another
// store: the reasons that are about this store's stock, not the article.
func (r CancellationReason) Reassignable() bool {
	return r == ReasonOutOfStock || r == ReasonItemMissing || r == ReasonItemBroken
}

// ReturnLocation is where an item of a store-fulfilled order came back.
type ReturnLocation string

const (
	ReturnToStore       ReturnLocation = "STORE"
	ReturnToMarketplace ReturnLocation = "MARKETPLACE"
)

// ReturnReasonCode is one of the seed's return reason codes.
type ReturnReasonCode int

// ReturnReasons maps every valid code to its meaning.
var ReturnReasons = map[ReturnReasonCode]string{
	1: "It does not suit the customer", 2: "Too big", 3: "Too small", 4: "Insufficient quality",
	5: "Arrived too late", 6: "Not as expected", 7: "Incorrect article", 8: "Faulty",
	9: "No reason available", 10: "Delivery failed", -1: "Unknown reason",
}

// Address is the customer's name and billing address.
type Address struct {
	FirstName    string `json:"first_name"`
	LastName     string `json:"last_name"`
	AddressLine1 string `json:"address_line_1"`
	AddressLine2 string `json:"address_line_2,omitempty"`
	AddressLine3 string `json:"address_line_3,omitempty"`
	ZipCode      string `json:"zip_code"`
	City         string `json:"city"`
	CountryCode  string `json:"country_code"`
}

func (a *Address) validate() error {
	if a == nil {
		return nil
	}
	for _, f := range []struct{ name, v string }{
		{"first_name", a.FirstName}, {"last_name", a.LastName}, {"address_line_1", a.AddressLine1},
		{"zip_code", a.ZipCode}, {"city", a.City}, {"country_code", a.CountryCode},
	} {
		if strings.TrimSpace(f.v) == "" {
			return Errorf(EUNPROCESSABLE, "customer_billing_address.%s is required.", f.name)
		}
	}
	for _, f := range []struct{ name, v string }{
		{"first_name", a.FirstName}, {"last_name", a.LastName}, {"address_line_1", a.AddressLine1},
		{"address_line_2", a.AddressLine2}, {"address_line_3", a.AddressLine3},
		{"zip_code", a.ZipCode}, {"city", a.City}, {"country_code", a.CountryCode},
	} {
		if err := CheckText("customer_billing_address."+f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

// DeliveryDetails is the delivery and return tracking of an order.
type DeliveryDetails struct {
	DeliveryTrackingNumber string `json:"delivery_tracking_number,omitempty"`
	DeliveryCarrierName    string `json:"delivery_carrier_name,omitempty"`
	ReturnTrackingNumber   string `json:"return_tracking_number,omitempty"`
	ReturnCarrierName      string `json:"return_carrier_name,omitempty"`
}

// validate refuses control characters in the tracking numbers and carrier
// names, which are sent on in every event.
func (d *DeliveryDetails) validate() error {
	if d == nil {
		return nil
	}
	for _, f := range []struct{ name, v string }{
		{"delivery_tracking_number", d.DeliveryTrackingNumber}, {"delivery_carrier_name", d.DeliveryCarrierName},
		{"return_tracking_number", d.ReturnTrackingNumber}, {"return_carrier_name", d.ReturnCarrierName},
	} {
		if err := CheckText("delivery_details."+f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

// merge returns d with the fields that u sets; nil when nothing is set.
func (d *DeliveryDetails) merge(u *DeliveryDetails) *DeliveryDetails {
	var out DeliveryDetails
	if d != nil {
		out = *d
	}
	if u != nil {
		for _, f := range []struct {
			dst *string
			src string
		}{
			{&out.DeliveryTrackingNumber, u.DeliveryTrackingNumber}, {&out.DeliveryCarrierName, u.DeliveryCarrierName},
			{&out.ReturnTrackingNumber, u.ReturnTrackingNumber}, {&out.ReturnCarrierName, u.ReturnCarrierName},
		} {
			if f.src != "" {
				*f.dst = f.src
			}
		}
	}
	if out == (DeliveryDetails{}) {
		return nil
	}
	return &out
}

// Item is one unit of an order.
type Item struct {
	ItemID                   string             `json:"item_id"`
	EAN                      string             `json:"ean"`
	Price                    Money              `json:"price"`
	Currency                 string             `json:"currency"`
	ArticleNumber            string             `json:"article_number"`
	MarketplaceArticleNumber string             `json:"marketplace_article_number"`
	ArticleLocation          string             `json:"article_location,omitempty"`
	Status                   ItemStatus         `json:"status"`
	CancellationReason       CancellationReason `json:"cancellation_reason,omitempty"`
	ReturnReasonCode         *ReturnReasonCode  `json:"return_reason_code,omitempty"`
	ReturnLocation           ReturnLocation     `json:"return_location,omitempty"`
	ReturnStoreID            string             `json:"return_store_id,omitempty"`
	// Reserving is true while the unit holds stock at the order's store:
	// from assignment until it is cancelled, or until a feed row for its
	// store and EAN is applied after it was fulfilled.
	Reserving bool `json:"-"`
}

// Order is a customer order as one store (or the marketplace warehouse)
// handles it.
type Order struct {
	ID                     string           `json:"order_id"`
	OrderNumber            string           `json:"order_number"`
	ClientID               string           `json:"client_id"`
	StoreID                string           `json:"store_id,omitempty"`
	State                  OrderState       `json:"state"`
	Items                  []Item           `json:"items"`
	CustomerBillingAddress *Address         `json:"customer_billing_address,omitempty"`
	DeliveryDetails        *DeliveryDetails `json:"delivery_details,omitempty"`
	// ReassignedFrom is the order whose cancelled items this order took over.
	ReassignedFrom string `json:"reassigned_from,omitempty"`
	// ReassignedOrderID is the order that took over cancelled items.
	ReassignedOrderID string    `json:"reassigned_order_id,omitempty"`
	CreatedAt         time.Time `json:"created_at"`
	UpdatedAt         time.Time `json:"updated_at"`
	// Replayed is true on the answer to a create call whose idempotency key
	// was remembered: the order is the one the first call made, and this
	// call wrote nothing. It is not part of the order's JSON; the HTTP API
	// says it with the Idempotent-Replayed header.
	Replayed bool `json:"-"`
}

// item returns the item with id, or nil.
func (o *Order) item(id string) *Item {
	for i := range o.Items {
		if o.Items[i].ItemID == id {
			return &o.Items[i]
		}
	}
	return nil
}

// OrderFilter selects orders, newest first; Before is an order id.
type OrderFilter struct {
	ClientID    string
	OrderNumber string
	State       OrderState
	Limit       int
	Before      string
}

// OrderService changes orders. Each call that changes an order writes the
// new state and its event in one transaction.
//
// Errors: ENOTFOUND for an unknown order; ECONFLICT for a transition the
// table does not allow (naming the current state) and for an order no store
// can take; EUNPROCESSABLE for unknown clients, stores or item ids, values
// outside the seed's tables, and items returned twice.
type OrderService interface {
	// CreateOrder and CreateWarehouseOrder remember n.IdempotencyKey, when
	// set, for the client of n, in the transaction that writes the order.
	// A later call with the same key and the same request (RequestHash)
	// answers with that order as it now stands, marked Replayed, and writes
	// nothing; with another request, EUNPROCESSABLE. Calls with one key run
	// one after the other, so racing retries never make two orders. A call
	// that fails leaves no key behind. EINVALID for a malformed key.
	CreateOrder(ctx context.Context, n NewOrder) (*Order, error)
	CreateWarehouseOrder(ctx context.Context, n NewOrder) (*Order, error)
	// CancelOrder sets ReassignedOrderID on the answer when items went to a
	// new order.
	CancelOrder(ctx context.Context, orderID string, r CancelRequest) (*Order, error)
	FulfilOrder(ctx context.Context, orderID string, r FulfilRequest) (*Order, error)
	ReturnItems(ctx context.Context, orderID string, r ReturnRequest) (*Order, error)
	WarehouseReturn(ctx context.Context, orderID string, r WarehouseReturnRequest) (*Order, error)
	Order(ctx context.Context, orderID string) (*Order, error)
	Orders(ctx context.Context, f OrderFilter) ([]Order, error)
	// OrderEvents lists an order's events, oldest first.
	OrderEvents(ctx context.Context, orderID string) ([]EventRecord, error)
}

// EventService reads a client's events in the order they happened.
type EventService interface {
	// Events lists events after the cursor ("" for the start) and the
	// cursor to continue from (the last event's, or after when none).
	// Errors: EINVALID for a cursor this service did not make,
	// ECURSORAHEAD (with the newest cursor) for one past the newest event.
	Events(ctx context.Context, clientID, after string, limit int) ([]EventRecord, string, error)
}
