package service

import (
	"slices"
	"testing"
	"time"

	"storelink"
)

// soldStatuses are the statuses a fulfilment leaves its units in, which
// still hold their stock: a fulfilled item keeps its reservation until a
// feed row ends it.
func TestSoldStatusesAreWhatFulfilmentLeaves(t *testing.T) {
	now := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	o := &storelink.Order{ID: "o", State: storelink.StateAssigned, Items: []storelink.Item{
		{ItemID: "i1", Status: storelink.ItemAssigned, Reserving: true}}}
	if _, err := o.Fulfil(storelink.FulfilRequest{}, "e", now); err != nil {
		t.Fatal(err)
	}
	for _, it := range o.Items {
		if !slices.Contains(soldStatuses, it.Status) || !it.Reserving {
			t.Fatalf("fulfilled item %+v: want a status of soldStatuses %v, still reserving", it, soldStatuses)
		}
	}
	if slices.Contains(soldStatuses, storelink.ItemAssigned) || slices.Contains(soldStatuses, storelink.ItemCancelled) {
		t.Fatalf("soldStatuses %v name a unit that has not left its store", soldStatuses)
	}
}
