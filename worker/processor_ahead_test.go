package worker

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"storelink"
)

// A file is checked ahead of its apply against the client's stores as they
// were; when a store goes in between, the apply checks it again against
// the stores it locks, so that no row is written for the store that went
// and the report counts those rows as rejected. A file of more valid rows
// than the check ahead keeps is checked inside the apply, with the same
// outcome.
func TestProcessorCheckAhead(t *testing.T) {
	t.Parallel()
	feed := "store;ean;article_number;quantity;price;retail_price\n" +
		"S1;" + ean13(1) + ";A;1;1.00;2.00\n" +
		"S2;" + ean13(2) + ";B;2;1.00;2.00\n" +
		"S1;" + ean13(3) + ";C;3;1.00;2.00\n"
	for _, tc := range []struct {
		name          string
		rowsAhead     int
		dropS2        bool
		applied, rejd int
	}{
		{"kept ahead", 0, false, 3, 0},
		{"a store gone in between", 0, true, 2, 1},
		{"more rows than kept ahead", 1, false, 3, 0},
		{"more rows than kept ahead, a store gone", 1, true, 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			ctx := context.Background()
			for _, s := range []string{"S1", "S2"} {
				if _, _, err := f.service.Partners.PutStore(ctx, f.clientID, s, "Store"); err != nil {
					t.Fatal(err)
				}
			}
			u := f.accept(f.clientID, feed)
			p := NewProcessor(f.service.Uploads, slog.New(slog.DiscardHandler), "test", prometheus.NewRegistry())
			p.Interval, p.rowsAhead = 10*time.Millisecond, tc.rowsAhead
			ahead := 0
			p.aheadHook = func(*storelink.Claim) {
				ahead++
				if tc.dropS2 {
					if err := f.service.Partners.DeleteStore(ctx, f.clientID, "S2"); err != nil {
						t.Error(err)
					}
				}
			}
			if tc.dropS2 && tc.rowsAhead == 1 {
				// No check ahead to hook: the store goes before the claim.
				if err := f.service.Partners.DeleteStore(ctx, f.clientID, "S2"); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { _ = p.Run(ctx); close(done) }()
			t.Cleanup(func() { cancel(); <-done })
			got := f.waitFinal(f.clientID, u, 20*time.Second)
			if got.Status != storelink.UploadApplied || got.RowsApplied != tc.applied || got.RowsRejected != tc.rejd {
				t.Fatalf("upload %s, %d applied, %d rejected; want applied, %d and %d", got.Status, got.RowsApplied, got.RowsRejected, tc.applied, tc.rejd)
			}
			if want := tc.rowsAhead == 0; (ahead == 1) != want {
				t.Fatalf("checked ahead %d times; want a check ahead: %v", ahead, want)
			}
			rows, _, err := f.service.Uploads.Stock(ctx, f.clientID, storelink.StockFilter{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				if tc.dropS2 && r.StoreID == "S2" {
					t.Fatalf("stock written for store S2, which was gone: %+v", r)
				}
			}
			if len(rows) != tc.applied {
				t.Fatalf("%d stock rows, want %d", len(rows), tc.applied)
			}
		})
	}
}
