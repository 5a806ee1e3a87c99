package storelink

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// MaxOrderItems bounds the units of one order; an order is a customer's
// basket, and a larger one is a mistake or an attack.
const MaxOrderItems = 500

// NewItem is one unit of a new order.
type NewItem struct {
	EAN                      string `json:"ean"`
	MarketplaceArticleNumber string `json:"marketplace_article_number"`
	Price                    *Money `json:"price,omitempty"`
	ArticleNumber            string `json:"article_number,omitempty"`
}

// NewOrder is a request to create an order (assigned to a store, or
// fulfilled by the marketplace warehouse).
type NewOrder struct {
	OrderNumber            string           `json:"order_number"`
	ClientID               string           `json:"client_id"`
	StoreID                string           `json:"store_id,omitempty"`
	Items                  []NewItem        `json:"items"`
	CustomerBillingAddress *Address         `json:"customer_billing_address,omitempty"`
	DeliveryDetails        *DeliveryDetails `json:"delivery_details,omitempty"`
	// IdempotencyKey, when set, makes the call safe to retry: see
	// IdempotencyKeyTTL. It comes from a header, not from the body, and is
	// not part of the request's hash.
	IdempotencyKey string `json:"-"`
}

// Validate checks what can be checked without the database.
func (n *NewOrder) Validate() error {
	if n.IdempotencyKey != "" {
		if err := CheckIdempotencyKey(n.IdempotencyKey); err != nil {
			return err
		}
	}
	n.OrderNumber = strings.TrimSpace(n.OrderNumber)
	switch {
	case n.OrderNumber == "" || len(n.OrderNumber) > 64:
		return Errorf(EUNPROCESSABLE, "order_number is required (1 to 64 characters).")
	case n.ClientID == "":
		return Errorf(EUNPROCESSABLE, "client_id is required.")
	case len(n.Items) == 0:
		return Errorf(EUNPROCESSABLE, "items must list at least one item (one entry per unit).")
	case len(n.Items) > MaxOrderItems:
		return Errorf(EUNPROCESSABLE, "items lists %d units; at most %d are allowed.", len(n.Items), MaxOrderItems)
	}
	for _, f := range []struct{ name, v string }{
		{"order_number", n.OrderNumber}, {"client_id", n.ClientID}, {"store_id", n.StoreID},
	} {
		if err := CheckText(f.name, f.v); err != nil {
			return err
		}
	}
	for i, it := range n.Items {
		if err := CheckText(fmt.Sprintf("items[%d].marketplace_article_number", i), it.MarketplaceArticleNumber); err != nil {
			return err
		}
		if err := CheckText(fmt.Sprintf("items[%d].article_number", i), it.ArticleNumber); err != nil {
			return err
		}
		switch {
		case !ValidGTIN(it.EAN):
			return Errorf(EUNPROCESSABLE, "items[%d].ean %q is not an EAN/GTIN of 8, 12, 13 or 14 digits with a valid check digit.", i, it.EAN)
		case strings.TrimSpace(it.MarketplaceArticleNumber) == "":
			return Errorf(EUNPROCESSABLE, "items[%d].marketplace_article_number is required.", i)
		case it.Price != nil && *it.Price <= 0:
			return Errorf(EUNPROCESSABLE, "items[%d].price must be greater than 0.", i)
		case len(it.ArticleNumber) > 64:
			return Errorf(EUNPROCESSABLE, "items[%d].article_number is longer than 64 characters.", i)
		}
	}
	if err := n.DeliveryDetails.validate(); err != nil {
		return err
	}
	return n.CustomerBillingAddress.validate()
}

// Needs counts the units of each EAN.
func (n *NewOrder) Needs() map[string]int {
	m := map[string]int{}
	for _, it := range n.Items {
		m[it.EAN]++
	}
	return m
}

// ItemNeeds counts the units of each EAN among items.
func ItemNeeds(items []Item) map[string]int {
	m := map[string]int{}
	for _, it := range items {
		m[it.EAN]++
	}
	return m
}

// StoreStock is stock in force by store and EAN, as routing reads it.
type StoreStock map[string]map[string]*Stock

// Add files a stock row (with Quantity and Reserved read) and works out what
// is available of it.
func (s StoreStock) Add(row *Stock) {
	row.Available = max(row.Quantity-row.Reserved, 0)
	if s[row.StoreID] == nil {
		s[row.StoreID] = map[string]*Stock{}
	}
	s[row.StoreID][row.EAN] = row
}

// Available is the units in force by store and EAN, for Route.
func (s StoreStock) Available() map[string]map[string]int {
	out := make(map[string]map[string]int, len(s))
	for store, rows := range s {
		out[store] = make(map[string]int, len(rows))
		for ean, r := range rows {
			out[store][ean] = r.Available
		}
	}
	return out
}

// Route picks the store for needs (units per EAN) among available (store →
// EAN → units in force): a store that covers every need, the one with the
// most stock of the needed articles first, then the lowest store id. It
// returns "" when no store can. exclude is never picked.
func Route(needs map[string]int, available map[string]map[string]int, exclude string) string {
	ids := make([]string, 0, len(available))
	for id := range available {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	best, bestStock := "", -1
	for _, id := range ids {
		if id == exclude {
			continue
		}
		total, covers := 0, true
		for ean, n := range needs {
			a := available[id][ean]
			if a < n {
				covers = false
				break
			}
			total += a
		}
		if covers && total > bestStock {
			best, bestStock = id, total
		}
	}
	return best
}

// Assign makes the order of n at storeID. rows holds the store's stock rows
// by EAN; article number, location and price come from them unless given.
func Assign(n *NewOrder, c *Client, storeID string, rows map[string]*Stock, newID func() string, now time.Time) (*Order, *Event, error) {
	if err := Transition(StateNone, StateAssigned); err != nil {
		return nil, nil, err
	}
	o := &Order{ID: newID(), OrderNumber: n.OrderNumber, ClientID: c.ID, StoreID: storeID, State: StateAssigned,
		CustomerBillingAddress: n.CustomerBillingAddress, DeliveryDetails: n.DeliveryDetails.merge(nil),
		CreatedAt: now, UpdatedAt: now}
	for i, it := range n.Items {
		item, err := newOrderItem(i, it, c, rows[it.EAN], "store "+storeID, newID)
		if err != nil {
			return nil, nil, err
		}
		item.Status, item.Reserving = ItemAssigned, true
		o.Items = append(o.Items, item)
	}
	return o, newEvent(o, newID(), now, storeID, o.Items, nil), nil
}

func newOrderItem(i int, it NewItem, c *Client, row *Stock, where string, newID func() string) (Item, error) {
	item := Item{ItemID: newID(), EAN: it.EAN, Currency: c.Currency, ArticleNumber: it.ArticleNumber,
		MarketplaceArticleNumber: strings.TrimSpace(it.MarketplaceArticleNumber)}
	if row != nil {
		if item.ArticleNumber == "" {
			item.ArticleNumber = row.ArticleNumber
		}
		item.ArticleLocation, item.Price = row.ArticleLocation, row.Price
	}
	if it.Price != nil {
		item.Price = *it.Price
	}
	if item.ArticleNumber == "" {
		return item, Errorf(EUNPROCESSABLE, "items[%d]: no article_number given and %s has no stock row for EAN %s.", i, where, it.EAN)
	}
	if item.Price <= 0 {
		return item, Errorf(EUNPROCESSABLE, "items[%d]: no price given and %s has no stock row for EAN %s.", i, where, it.EAN)
	}
	return item, nil
}

// ItemReason names an item and why it was cancelled.
type ItemReason struct {
	ItemID             string             `json:"item_id"`
	CancellationReason CancellationReason `json:"cancellation_reason,omitempty"`
}

// reasons checks a list of item reasons against o: known, once each, valid
// reasons. An item listed without a reason gets UNKNOWN_REASON.
func (o *Order) reasons(list []ItemReason, field string) (map[string]CancellationReason, error) {
	m := make(map[string]CancellationReason, len(list))
	for i, r := range list {
		if o.item(r.ItemID) == nil {
			return nil, Errorf(EUNPROCESSABLE, "%s[%d].item_id %q is not an item of order %s.", field, i, r.ItemID, o.ID)
		}
		if _, dup := m[r.ItemID]; dup {
			return nil, Errorf(EUNPROCESSABLE, "%s lists item %s twice.", field, r.ItemID)
		}
		reason := r.CancellationReason
		if reason == "" {
			reason = ReasonUnknownReason
		}
		if !reason.Valid() {
			return nil, Errorf(EUNPROCESSABLE, "%s[%d].cancellation_reason %q is not one of ITEM_BROKEN, ITEM_MISSING, OUT_OF_STOCK, UNKNOWN_REASON.", field, i, r.CancellationReason)
		}
		m[r.ItemID] = reason
	}
	return m, nil
}

// CancelRequest cancels every item of an assigned order.
type CancelRequest struct {
	Items    []ItemReason `json:"items,omitempty"`
	Reassign bool         `json:"reassign,omitempty"`
}

// Cancel cancels all items of o. It returns the event and, when r asks for
// it, the items that may go to another store.
func (o *Order) Cancel(r CancelRequest, eventID string, now time.Time) (*Event, []Item, error) {
	if err := Transition(o.State, StateCancelled); err != nil {
		return nil, nil, err
	}
	reasons, err := o.reasons(r.Items, "items")
	if err != nil {
		return nil, nil, err
	}
	var again []Item
	for i := range o.Items {
		it := &o.Items[i]
		it.Status, it.Reserving, it.CancellationReason = ItemCancelled, false, ReasonUnknownReason
		if reason, ok := reasons[it.ItemID]; ok {
			it.CancellationReason = reason
		}
		if r.Reassign && it.CancellationReason.Reassignable() {
			again = append(again, *it)
		}
	}
	o.State, o.UpdatedAt = StateCancelled, now
	return newEvent(o, eventID, now, o.StoreID, o.Items, nil), again, nil
}

// Reassign makes a new order at storeID for items cancelled from o: the same
// order number, customer and prices, with the new store's article data.
func Reassign(o *Order, items []Item, storeID string, rows map[string]*Stock, newID func() string, now time.Time) (*Order, *Event) {
	n := &Order{ID: newID(), OrderNumber: o.OrderNumber, ClientID: o.ClientID, StoreID: storeID, State: StateAssigned,
		CustomerBillingAddress: o.CustomerBillingAddress, DeliveryDetails: o.DeliveryDetails,
		ReassignedFrom: o.ID, CreatedAt: now, UpdatedAt: now}
	for _, it := range items {
		item := Item{ItemID: newID(), EAN: it.EAN, Price: it.Price, Currency: it.Currency, ArticleNumber: it.ArticleNumber,
			MarketplaceArticleNumber: it.MarketplaceArticleNumber, Status: ItemAssigned, Reserving: true}
		if row := rows[it.EAN]; row != nil {
			item.ArticleNumber, item.ArticleLocation = row.ArticleNumber, row.ArticleLocation
		}
		n.Items = append(n.Items, item)
	}
	o.ReassignedOrderID = n.ID
	return n, newEvent(n, newID(), now, storeID, n.Items, nil)
}

// FulfilRequest fulfils an assigned order with the items picked.
type FulfilRequest struct {
	// PickedItemIDs defaults to every item not in CancelledItems.
	PickedItemIDs   []string         `json:"picked_item_ids,omitempty"`
	CancelledItems  []ItemReason     `json:"cancelled_items,omitempty"`
	DeliveryDetails *DeliveryDetails `json:"delivery_details,omitempty"`
}

// Fulfil marks the picked items fulfilled and cancels the others.
func (o *Order) Fulfil(r FulfilRequest, eventID string, now time.Time) (*Event, error) {
	if err := Transition(o.State, StateFulfilled); err != nil {
		return nil, err
	}
	if err := r.DeliveryDetails.validate(); err != nil {
		return nil, err
	}
	reasons, err := o.reasons(r.CancelledItems, "cancelled_items")
	if err != nil {
		return nil, err
	}
	picked := map[string]bool{}
	for i, id := range r.PickedItemIDs {
		switch {
		case o.item(id) == nil:
			return nil, Errorf(EUNPROCESSABLE, "picked_item_ids[%d] %q is not an item of order %s.", i, id, o.ID)
		case picked[id]:
			return nil, Errorf(EUNPROCESSABLE, "picked_item_ids lists item %s twice.", id)
		case reasons[id] != "":
			return nil, Errorf(EUNPROCESSABLE, "Item %s is both picked and cancelled.", id)
		}
		picked[id] = true
	}
	if r.PickedItemIDs == nil {
		for _, it := range o.Items {
			picked[it.ItemID] = reasons[it.ItemID] == ""
		}
	}
	if !slices.ContainsFunc(o.Items, func(it Item) bool { return picked[it.ItemID] }) {
		return nil, Errorf(EUNPROCESSABLE, "At least one item must be picked to fulfil the order; cancel it instead.")
	}
	var got, dropped []Item
	for i := range o.Items {
		it := &o.Items[i]
		if picked[it.ItemID] {
			it.Status = ItemFulfilled
			got = append(got, *it)
			continue
		}
		it.Status, it.Reserving, it.CancellationReason = ItemCancelled, false, ReasonUnknownReason
		if reason := reasons[it.ItemID]; reason != "" {
			it.CancellationReason = reason
		}
		dropped = append(dropped, *it)
	}
	o.State, o.UpdatedAt = StateFulfilled, now
	o.DeliveryDetails = o.DeliveryDetails.merge(r.DeliveryDetails)
	return newEvent(o, eventID, now, o.StoreID, got, dropped), nil
}

// ReturnItem is one unit coming back from the customer.
type ReturnItem struct {
	ItemID           string            `json:"item_id"`
	ReturnReasonCode *ReturnReasonCode `json:"return_reason_code,omitempty"`
	ReturnLocation   ReturnLocation    `json:"return_location"`
}

// ReturnRequest returns items of a store-fulfilled order.
type ReturnRequest struct {
	StoreID         string           `json:"store_id,omitempty"`
	Items           []ReturnItem     `json:"items"`
	DeliveryDetails *DeliveryDetails `json:"delivery_details,omitempty"`
}

// returnable checks that id is a fulfilled item of o not yet returned.
func (o *Order) returnable(i int, id string, seen map[string]bool) (*Item, error) {
	it := o.item(id)
	switch {
	case it == nil:
		return nil, Errorf(EUNPROCESSABLE, "items[%d].item_id %q is not an item of order %s.", i, id, o.ID)
	case seen[id]:
		return nil, Errorf(EUNPROCESSABLE, "items lists item %s twice.", id)
	case it.Status == ItemReturned:
		return nil, Errorf(EUNPROCESSABLE, "Item %s has already been returned.", id)
	case it.Status != ItemFulfilled:
		return nil, Errorf(EUNPROCESSABLE, "Item %s was not fulfilled (it is %s); only fulfilled items can be returned.", id, it.Status)
	}
	seen[id] = true
	return it, nil
}

func checkReasonCode(i int, c *ReturnReasonCode) error {
	if c == nil {
		return nil
	}
	if _, ok := ReturnReasons[*c]; !ok {
		return Errorf(EUNPROCESSABLE, "items[%d].return_reason_code %d is not one of 1 to 10 or -1.", i, *c)
	}
	return nil
}

// Return marks items of a store-fulfilled order returned. storeExists tells
// whether a store id belongs to the order's client.
func (o *Order) Return(r ReturnRequest, storeExists func(string) bool, eventID string, now time.Time) (*Event, error) {
	if err := Transition(o.State, StateReturned); err != nil {
		return nil, err
	}
	if err := r.DeliveryDetails.validate(); err != nil {
		return nil, err
	}
	if len(r.Items) == 0 {
		return nil, Errorf(EUNPROCESSABLE, "items must list at least one returned item.")
	}
	toStore := r.StoreID
	if toStore == "" {
		toStore = o.StoreID
	}
	if toStore != o.StoreID && !storeExists(toStore) {
		return nil, Errorf(EUNPROCESSABLE, "store_id %q is not a store of this client.", toStore)
	}
	seen := map[string]bool{}
	var items []*Item
	var byLocation = map[ReturnLocation]bool{}
	for i, ri := range r.Items {
		it, err := o.returnable(i, ri.ItemID, seen)
		if err != nil {
			return nil, err
		}
		if ri.ReturnLocation != ReturnToStore && ri.ReturnLocation != ReturnToMarketplace {
			return nil, Errorf(EUNPROCESSABLE, "items[%d].return_location %q is not STORE or MARKETPLACE.", i, ri.ReturnLocation)
		}
		if err := checkReasonCode(i, ri.ReturnReasonCode); err != nil {
			return nil, err
		}
		byLocation[ri.ReturnLocation] = true
		items = append(items, it)
	}
	// An event carries one store_id: the fulfilling store for MARKETPLACE.
	storeID := toStore
	if byLocation[ReturnToMarketplace] {
		if byLocation[ReturnToStore] && toStore != o.StoreID {
			return nil, Errorf(EUNPROCESSABLE, "Items returned to the marketplace and to store %s must be sent as two returns: an event names one store.", toStore)
		}
		storeID = o.StoreID
	}
	var got []Item
	for i, it := range items {
		it.Status, it.ReturnReasonCode, it.ReturnLocation, it.ReturnStoreID = ItemReturned, r.Items[i].ReturnReasonCode, r.Items[i].ReturnLocation, storeID
		got = append(got, *it)
	}
	o.State, o.UpdatedAt = StateReturned, now
	o.DeliveryDetails = o.DeliveryDetails.merge(r.DeliveryDetails)
	return newEvent(o, eventID, now, storeID, got, nil), nil
}

// NewWarehouseOrder makes an order the marketplace warehouse fulfilled. rows
// holds, by EAN, a stock row of any of the client's stores, for article data
// not given in the request.
func NewWarehouseOrder(n *NewOrder, c *Client, rows map[string]*Stock, newID func() string, now time.Time) (*Order, *Event, error) {
	if n.StoreID != "" {
		return nil, nil, Errorf(EUNPROCESSABLE, "A warehouse order has no store_id.")
	}
	if err := Transition(StateNone, StateWarehouseFulfilled); err != nil {
		return nil, nil, err
	}
	o := &Order{ID: newID(), OrderNumber: n.OrderNumber, ClientID: c.ID, State: StateWarehouseFulfilled,
		CustomerBillingAddress: n.CustomerBillingAddress, DeliveryDetails: n.DeliveryDetails.merge(nil),
		CreatedAt: now, UpdatedAt: now}
	for i, it := range n.Items {
		item, err := newOrderItem(i, it, c, rows[it.EAN], "the client", newID)
		if err != nil {
			return nil, nil, err
		}
		// A store's location says where the article is in that store;
		// the warehouse's own location is not known here.
		item.Status, item.ArticleLocation = ItemFulfilled, ""
		o.Items = append(o.Items, item)
	}
	return o, newEvent(o, newID(), now, "", o.Items, nil), nil
}

// WarehouseReturnItem is one unit returned to the marketplace warehouse.
type WarehouseReturnItem struct {
	ItemID           string            `json:"item_id"`
	ReturnReasonCode *ReturnReasonCode `json:"return_reason_code,omitempty"`
}

// WarehouseReturnRequest returns items of a warehouse-fulfilled order.
type WarehouseReturnRequest struct {
	Items []WarehouseReturnItem `json:"items"`
}

// WarehouseReturn marks items of a warehouse-fulfilled order returned.
func (o *Order) WarehouseReturn(r WarehouseReturnRequest, eventID string, now time.Time) (*Event, error) {
	if err := Transition(o.State, StateWarehouseReturned); err != nil {
		return nil, err
	}
	if len(r.Items) == 0 {
		return nil, Errorf(EUNPROCESSABLE, "items must list at least one returned item.")
	}
	seen := map[string]bool{}
	var items []*Item
	for i, ri := range r.Items {
		it, err := o.returnable(i, ri.ItemID, seen)
		if err != nil {
			return nil, err
		}
		if err := checkReasonCode(i, ri.ReturnReasonCode); err != nil {
			return nil, err
		}
		items = append(items, it)
	}
	var got []Item
	for i, it := range items {
		it.Status, it.ReturnReasonCode = ItemReturned, r.Items[i].ReturnReasonCode
		got = append(got, *it)
	}
	o.State, o.UpdatedAt = StateWarehouseReturned, now
	return newEvent(o, eventID, now, "", got, nil), nil
}

// ValidGTIN tells whether s is an EAN-8, UPC-12, EAN-13 or GTIN-14 with a
// valid GS1 check digit.
func ValidGTIN(s string) bool {
	switch len(s) {
	case 8, 12, 13, 14:
	default:
		return false
	}
	sum := 0
	for i := 0; i < len(s); i++ {
		d := int(s[i]) - '0'
		if d < 0 || d > 9 {
			return false
		}
		if (len(s)-i)%2 == 0 { // weight 3 on every second digit from the right
			d *= 3
		}
		sum += d
	}
	return sum%10 == 0
}
