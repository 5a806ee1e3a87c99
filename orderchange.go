package storelink

import (
	"slices"
	"time"
)

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
// whether a store id belongs to the order's client. An item returned to the
// MARKETPLACE is recorded under the store that fulfilled the order (its
// event names that store), so a store_id naming another store contradicts
// it and the return is refused, naming the item, rather than recorded under
// a store the caller did not name.
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
	for i, ri := range r.Items {
		it, err := o.returnable(i, ri.ItemID, seen)
		if err != nil {
			return nil, err
		}
		if ri.ReturnLocation != ReturnToStore && ri.ReturnLocation != ReturnToMarketplace {
			return nil, Errorf(EUNPROCESSABLE, "items[%d].return_location %q is not STORE or MARKETPLACE.", i, ri.ReturnLocation)
		}
		if ri.ReturnLocation == ReturnToMarketplace && toStore != o.StoreID {
			return nil, Errorf(EUNPROCESSABLE, "items[%d] (item %s) has return_location MARKETPLACE but store_id is %q: an item returned "+
				"to the marketplace is recorded under the store that fulfilled the order, %q. Send store_id %q or none; items that "+
				"came back to store %q are returned as STORE in a call of their own.", i, ri.ItemID, toStore, o.StoreID, o.StoreID, toStore)
		}
		if err := checkReasonCode(i, ri.ReturnReasonCode); err != nil {
			return nil, err
		}
		items = append(items, it)
	}
	// An event carries one store_id: the store the items came back to, which
	// is the fulfilling store when any came back to the marketplace.
	var got []Item
	for i, it := range items {
		it.Status, it.ReturnReasonCode, it.ReturnLocation, it.ReturnStoreID = ItemReturned, r.Items[i].ReturnReasonCode, r.Items[i].ReturnLocation, toStore
		got = append(got, *it)
	}
	o.State, o.UpdatedAt = StateReturned, now
	o.DeliveryDetails = o.DeliveryDetails.merge(r.DeliveryDetails)
	return newEvent(o, eventID, now, toStore, got, nil), nil
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
