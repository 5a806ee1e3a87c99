package service_test

import (
	"context"
	"testing"
	"time"
)

// The services stamp what they write with their clock, truncated to the
// millisecond that every database keeps, so that an answer shows what a
// later read shows.
func TestServicesStampWithTheirClock(t *testing.T) {
	eachDatabase(t, func(t *testing.T, db database) {
		ctx := context.Background()
		db.clock.advance(1234567 * time.Nanosecond)
		p, err := db.svc.Partners.CreatePartner(ctx, "Acme")
		if err != nil {
			t.Fatal(err)
		}
		want := db.clock.now().Truncate(time.Millisecond)
		if !p.CreatedAt.Equal(want) {
			t.Errorf("created at %v, want the clock's %v", p.CreatedAt, want)
		}
		all, err := db.svc.Partners.Partners(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 1 || !all[0].CreatedAt.Equal(p.CreatedAt) {
			t.Errorf("read back %+v, want one partner created at %v", all, p.CreatedAt)
		}
	})
}
