package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"storelink"
	"storelink/internal/dbtest"
)

// The claim takes the pending state as a parameter and still finds its
// deliveries through the partial indexes of pending ones: claimLockSQL has
// it planned for its parameters even on a connection where PostgreSQL
// settled on generic plans, which know no state and could use none of
// those indexes.
func TestClaimPlanUsesPendingIndexes(t *testing.T) {
	ctx := context.Background()
	dbURL := dbtest.Schema(t)
	db, err := Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var check string
	if err := tx.QueryRow(ctx, claimLockSQL, lockDeliveryClaims, settingKeyCheck).Scan(&check); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `PREPARE claim AS `+claimDeliveriesSQL); err != nil {
		t.Fatal(err)
	}
	// EXPLAIN EXECUTE takes no parameters of its own: the claim's are
	// written out.
	rows, err := tx.Query(ctx, fmt.Sprintf(`EXPLAIN (COSTS OFF) EXECUTE claim(now(), 'w1', now() + interval '1 minute', 10, 100,
		'{}', '{}', 1000, '', '%s', '%s')`, settingKeyCheck, storelink.DeliveryPending))
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	for _, index := range []string{"deliveries_endpoint_due", "deliveries_leased", "deliveries_order"} {
		if !strings.Contains(plan, "using "+index+" ") {
			t.Errorf("the claim's plan reads no %s:\n%s", index, plan)
		}
	}
}
