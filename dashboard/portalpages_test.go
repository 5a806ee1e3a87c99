package dashboard_test

import (
	"context"
	"html"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"storelink"
)

var deliveryRE = regexp.MustCompile(`data-delivery="([^"]+)"`)

// deliveriesShown lists the ids of the deliveries a page shows.
func deliveriesShown(page string) []string {
	var ids []string
	for _, m := range deliveryRE.FindAllStringSubmatch(page, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// TestPortalDeliveryFilters: the deliveries page filters by endpoint,
// status, order number and event id, alone or together, as the partner
// API does; the form keeps what was chosen, the next page keeps the
// filters, another client's endpoint or order selects nothing of theirs,
// and a filter the API refuses is refused.
func TestPortalDeliveryFilters(t *testing.T) {
	eachDatabase(t, fixtureOptions{}, func(t *testing.T, f *fixture) {
		s := f.seedData()
		o := f.seedOther(s)
		ctx := context.Background()
		second, err := f.services.Orders.CreateOrder(ctx, storelink.NewOrder{OrderNumber: "MP-1002", ClientID: s.ClientID, StoreID: "S1",
			Items: []storelink.NewItem{{EAN: ean1, MarketplaceArticleNumber: "MA-1"}}})
		must(t, err)
		all, err := f.services.Webhooks.Deliveries(ctx, storelink.DeliveryFilter{ClientID: s.ClientID, Limit: 100})
		must(t, err)
		want := func(keep func(d storelink.Delivery) bool) []string {
			var ids []string
			for _, d := range all {
				if keep(d) {
					ids = append(ids, d.ID)
				}
			}
			return ids
		}
		var event string
		for _, d := range all {
			if d.OrderID == second.ID {
				event = d.EventID
			}
		}
		b := f.browser()
		b.portalLogin(s.ClientID, s.APIKey)
		for _, c := range []struct {
			query string
			keep  func(d storelink.Delivery) bool
		}{
			{"", func(storelink.Delivery) bool { return true }},
			{"?endpoint_id=" + s.EndpointID, func(d storelink.Delivery) bool { return d.EndpointID == s.EndpointID }},
			{"?status=failed", func(d storelink.Delivery) bool { return d.State == storelink.DeliveryFailed }},
			{"?status=pending&order_number=MP-1002", func(d storelink.Delivery) bool { return d.OrderID == second.ID }},
			{"?order_number=MP-1001", func(d storelink.Delivery) bool { return d.OrderID == s.OrderID }},
			{"?event_id=" + event, func(d storelink.Delivery) bool { return d.EventID == event }},
			{"?endpoint_id=" + s.EndpointID + "&status=pending", func(d storelink.Delivery) bool {
				return d.EndpointID == s.EndpointID && d.State == storelink.DeliveryPending
			}},
			{"?endpoint_id=" + o.EndpointID, func(storelink.Delivery) bool { return false }},
			{"?order_number=" + o.OrderNumber, func(storelink.Delivery) bool { return false }},
		} {
			page := b.page("/portal/deliveries" + c.query)
			got, wanted := deliveriesShown(page), want(c.keep)
			if !slices.Equal(got, wanted) || c.query == "" && len(got) != 4 {
				t.Errorf("deliveries%s = %v, want %v", c.query, got, wanted)
			}
			if len(wanted) == 0 && !strings.Contains(page, "No deliveries match these filters.") {
				t.Errorf("deliveries%s does not say that none match", c.query)
			}
			if strings.Contains(page, o.DeliveryID) {
				t.Errorf("deliveries%s shows the other client's delivery", c.query)
			}
		}
		page := b.page("/portal/deliveries?endpoint_id=" + s.EndpointID + "&status=pending&order_number=MP-1002&event_id=" + event)
		wantContains(t, "the filtered page's form", page, `<option value="`+s.EndpointID+`" selected>`, `<option value="pending" selected>`,
			`name="order_number" value="MP-1002"`, `name="event_id" value="`+event+`"`)

		// Page by page, one delivery each, the filters stay.
		first := b.page("/portal/deliveries?endpoint_id=" + s.EndpointID + "&limit=1")
		m := regexp.MustCompile(`class="pager"><a href="([^"]+)"`).FindStringSubmatch(first)
		if m == nil {
			t.Fatal("no link to the next page")
		}
		next := html.UnescapeString(m[1])
		if !strings.Contains(next, "endpoint_id="+s.EndpointID) {
			t.Errorf("the next page's link %q drops the endpoint filter", next)
		}
		got := append(deliveriesShown(first), deliveriesShown(b.page(next+"&limit=1"))...)
		if wanted := want(func(d storelink.Delivery) bool { return d.EndpointID == s.EndpointID }); !slices.Equal(got, wanted) {
			t.Errorf("two pages of one = %v, want %v", got, wanted)
		}

		for _, c := range []struct{ query, says string }{
			{"?event_id=" + strings.Repeat("e", storelink.MaxFilterValue+1), "event_id is 129 bytes long; at most 128 are allowed."},
			{"?status=lost", "status must be pending, succeeded, failed or cancelled."},
		} {
			if resp, page := b.get("/portal/deliveries" + c.query); resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, c.says) {
				t.Errorf("deliveries%.40s = %d, want 400 saying %q", c.query, resp.StatusCode, c.says)
			}
		}
	})
}
