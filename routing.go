package storelink

import (
	"fmt"
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

// NewWarehouseOrder makes an order the marketplace warehouse fulfilled. rows
// holds, by EAN, a stock row of any of the client's stores, for article data
// not given in the request; an item's article_location is its row's, as for
// a store order.
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
		item.Status = ItemFulfilled
		o.Items = append(o.Items, item)
	}
	return o, newEvent(o, newID(), now, "", o.Items, nil), nil
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
