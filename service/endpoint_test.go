package service_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"storelink"
)

// A change or deletion of an endpoint made on the condition of its
// version (If-Match) is made only while the endpoint is at that version:
// every change gives it a new one, a change that shows in nothing but
// updated_at within the same millisecond too (the clock here stands
// still), and of changes sent at once on one version exactly one is made.
func TestEndpointChangesOnItsVersion(t *testing.T) {
	eachDatabase(t, func(t *testing.T, db database) {
		ctx := context.Background()
		wh := db.svc.Webhooks
		c := client(t, db)
		e, err := wh.CreateEndpoint(ctx, c.ID, storelink.NewEndpoint{URL: "https://a.test/"}, endpointSecret)
		if err != nil {
			t.Fatal(err)
		}
		read := func() *storelink.EndpointDetail {
			t.Helper()
			d, err := wh.Endpoint(ctx, c.ID, e.ID)
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
		if got := read().Version(); got != e.Version() {
			t.Fatalf("version read back %s, want the one created %s", got, e.Version())
		}
		on := func(v ...string) *storelink.IfMatch { return &storelink.IfMatch{Versions: v} }
		url := "https://b.test/"
		_, err = wh.UpdateEndpoint(ctx, c.ID, e.ID, storelink.EndpointPatch{URL: &url, IfMatch: on("nope")})
		if storelink.ErrorCode(err) != storelink.EPRECONDITION {
			t.Fatalf("change on a version it never had = %v, want %s", err, storelink.EPRECONDITION)
		}
		if got := read(); got.URL != e.URL || got.Version() != e.Version() {
			t.Fatalf("after the refused change: %s at %s, want %s unchanged", got.URL, got.Version(), e.URL)
		}

		k1, k2 := "key-1", "key-2"
		e1, err := wh.UpdateEndpoint(ctx, c.ID, e.ID, storelink.EndpointPatch{APIKey: &k1, IfMatch: on("other", e.Version())})
		if err != nil {
			t.Fatal(err)
		}
		// Only the key changes, within the same millisecond: has_api_key
		// stays true, updated_at moves on.
		e2, err := wh.UpdateEndpoint(ctx, c.ID, e.ID, storelink.EndpointPatch{APIKey: &k2, IfMatch: on(e1.Version())})
		if err != nil {
			t.Fatal(err)
		}
		if e2.Version() == e1.Version() || !e2.UpdatedAt.After(e1.UpdatedAt) {
			t.Fatalf("a new key: version %s → %s, updated_at %s → %s; want both to move", e1.Version(), e2.Version(), e1.UpdatedAt, e2.UpdatedAt)
		}
		if _, err := wh.UpdateEndpoint(ctx, c.ID, e.ID, storelink.EndpointPatch{APIKey: &k1, IfMatch: on(e1.Version())}); storelink.ErrorCode(err) != storelink.EPRECONDITION {
			t.Fatalf("a change on the version before the last = %v, want %s", err, storelink.EPRECONDITION)
		}
		if got := read().Version(); got != e2.Version() {
			t.Fatalf("version read %s, want the last change's %s", got, e2.Version())
		}
		// A new secret, twice within the millisecond, is a new version each
		// time.
		r1, err := wh.RotateSecret(ctx, c.ID, e.ID, storelink.SecretRotation{Secret: endpointSecret, Overlap: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		r2, err := wh.RotateSecret(ctx, c.ID, e.ID, storelink.SecretRotation{Secret: endpointSecret, Overlap: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if r1.Version() == e2.Version() || r2.Version() == r1.Version() {
			t.Fatalf("versions around two rotations: %s, %s, %s; want each new", e2.Version(), r1.Version(), r2.Version())
		}
		e2 = r2

		const n = 6
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				u := fmt.Sprintf("https://c%d.test/", i)
				_, errs[i] = wh.UpdateEndpoint(ctx, c.ID, e.ID, storelink.EndpointPatch{URL: &u, IfMatch: on(e2.Version())})
			})
		}
		wg.Wait()
		made := 0
		for _, err := range errs {
			switch storelink.ErrorCode(err) {
			case "":
				made++
			case storelink.EPRECONDITION:
			default:
				t.Fatalf("a change sent at once with the others = %v", err)
			}
		}
		if made != 1 {
			t.Fatalf("%d of %d changes sent at once on one version were made, want 1: %v", made, n, errs)
		}

		cur := read()
		if err := wh.DeleteEndpoint(ctx, c.ID, e.ID, on(e2.Version())); storelink.ErrorCode(err) != storelink.EPRECONDITION {
			t.Fatalf("deletion on an old version = %v, want %s", err, storelink.EPRECONDITION)
		}
		if read().DeletedAt != nil {
			t.Fatal("the refused deletion deleted the endpoint")
		}
		if err := wh.DeleteEndpoint(ctx, c.ID, e.ID, on(cur.Version())); err != nil {
			t.Fatalf("deletion on the current version = %v", err)
		}
		if err := wh.DeleteEndpoint(ctx, c.ID, e.ID, on(cur.Version())); err != nil {
			t.Fatalf("deletion again, its answer lost = %v, want done", err)
		}
		gone := read()
		if gone.DeletedAt == nil {
			t.Fatal("the endpoint is not deleted")
		}
		if _, err := wh.UpdateEndpoint(ctx, c.ID, e.ID, storelink.EndpointPatch{URL: &url, IfMatch: on(cur.Version())}); storelink.ErrorCode(err) != storelink.EPRECONDITION {
			t.Fatalf("change of the deleted endpoint on its version before deletion = %v, want %s", err, storelink.EPRECONDITION)
		}
		if _, err := wh.UpdateEndpoint(ctx, c.ID, e.ID, storelink.EndpointPatch{URL: &url, IfMatch: &storelink.IfMatch{Any: true}}); storelink.ErrorCode(err) != storelink.ECONFLICT {
			t.Fatalf("change of the deleted endpoint with If-Match * = %v, want %s", err, storelink.ECONFLICT)
		}
	})
}
