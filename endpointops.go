package storelink

import "time"

// StatsWindow is how far back an endpoint's attempt statistics look.
const StatsWindow = 24 * time.Hour

// EndpointStats is how an endpoint has been doing: its attempts over the
// StatsWindow before now, and its deliveries as they stand. Figures that
// have no value (no attempt in the window, never a success) are omitted.
type EndpointStats struct {
	// Since is the start of the window the attempt figures cover.
	Since time.Time `json:"since"`
	// Attempts made in the window, and how many succeeded (2xx in time)
	// and failed (anything else).
	Attempts  int `json:"attempts"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	// SuccessRate is Succeeded / Attempts, from 0 to 1, to 4 decimals.
	SuccessRate *float64 `json:"success_rate,omitempty"`
	// LatencyP50MS and LatencyP95MS are the durations, in milliseconds,
	// that half and 95% of the window's attempts took at most (nearest
	// rank).
	LatencyP50MS *int64 `json:"latency_ms_p50,omitempty"`
	LatencyP95MS *int64 `json:"latency_ms_p95,omitempty"`
	// LastSuccessAt and LastFailureAt are the times of the endpoint's last
	// attempt that succeeded and that failed, however long ago.
	LastSuccessAt *time.Time `json:"last_success_at,omitempty"`
	LastFailureAt *time.Time `json:"last_failure_at,omitempty"`
	// Pending counts its deliveries pending now (due, waiting for earlier
	// events, or parked while it is disabled); FailedDeliveries those that
	// failed for good and have not been sent again.
	Pending          int `json:"pending"`
	FailedDeliveries int `json:"failed_deliveries"`
}

// EndpointDetail is an endpoint with its stats, as the operator's and the
// partner's views of one show it.
type EndpointDetail struct {
	Endpoint
	Stats EndpointStats `json:"stats"`
}

// TestResult is what came of a test send (TestEndpoint): the status the
// endpoint answered, or why no usable answer came, how long it took, and
// the start of the answer's body.
type TestResult struct {
	StatusCode      int    `json:"status_code,omitempty"`
	Error           string `json:"error,omitempty"`
	DurationMS      int64  `json:"duration_ms"`
	ResponseExcerpt string `json:"response_excerpt"`
}

// ExampleEvent is the event of a test send: an order of one item entering
// state, with the fields an event of that state carries, made up but valid
// against schema/order-event.json. storeID is the store it names (the
// warehouse states name none); currency the client's. Its ids are new
// (newID) and its order number starts with TEST- so that no receiver takes
// it for a real order; it is never stored.
func ExampleEvent(state OrderState, storeID, currency string, now time.Time, newID func() string) *Event {
	o := &Order{
		ID: newID(), OrderNumber: "TEST-" + now.UTC().Format("20060102150405"), State: state,
		DeliveryDetails: &DeliveryDetails{DeliveryCarrierName: "DHL", DeliveryTrackingNumber: "TEST-TRACKING-1"},
		CustomerBillingAddress: &Address{FirstName: "Erika", LastName: "Mustermann", AddressLine1: "Teststraße 1",
			ZipCode: "10115", City: "Berlin", CountryCode: "DE"},
	}
	item := Item{ItemID: newID(), EAN: "4006381333931", Price: 1999, Currency: currency, ArticleNumber: "TEST-SKU-1",
		MarketplaceArticleNumber: "TEST-MP-1", ArticleLocation: "Test department", Status: ItemAssigned}
	var cancelled []Item
	switch state {
	case StateCancelled:
		item.Status, item.CancellationReason = ItemCancelled, ReasonOutOfStock
	case StateFulfilled:
		// One item picked and one cancelled, as a partial fulfilment reports.
		item.Status = ItemFulfilled
		c := item
		c.ItemID, c.Status, c.CancellationReason = newID(), ItemCancelled, ReasonItemMissing
		cancelled = []Item{c}
	case StateReturned, StateWarehouseReturned:
		code := ReturnReasonCode(2)
		item.Status, item.ReturnReasonCode = ItemReturned, &code
		if state == StateReturned {
			item.ReturnLocation = ReturnToStore
			o.DeliveryDetails.ReturnCarrierName, o.DeliveryDetails.ReturnTrackingNumber = "DHL", "TEST-RETURN-1"
		}
	case StateWarehouseFulfilled:
		item.Status = ItemFulfilled
	}
	if state == StateWarehouseFulfilled || state == StateWarehouseReturned {
		storeID = ""
	}
	return newEvent(o, newID(), now, storeID, []Item{item}, cancelled)
}

// ExampleUpload is the upload a test send of EventUploadFinished reports:
// made up, applied with one row of three rejected, its file named
// test-stock.csv so that no receiver takes it for a real upload; it is
// never stored.
func ExampleUpload(clientID string, now time.Time, newID func() string) *Upload {
	finished := now.UTC()
	return &Upload{ID: newID(), ClientID: clientID, FileName: "test-stock.csv", Status: UploadApplied,
		ReceivedAt: finished.Add(-2 * time.Second), FinishedAt: &finished,
		RowsTotal: 3, RowsApplied: 2, RowsUnchanged: 1, RowsRejected: 1}
}
