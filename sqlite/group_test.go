package sqlite

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"storelink"
	"storelink/service"
)

// Order calls that come while another holds the write transaction commit
// with it (writeGroup). These tests line calls up behind a held turn, so
// that they form one group, and check what their callers are told against
// what the file holds: a call answered without an error is stored, and a
// call answered with one left nothing.

const groupEAN = "4006381333931"

// groupDB opens a database with a client, a store S1 with stock of
// groupEAN, and a group bound that the tests' calls never reach.
func groupDB(t *testing.T) (*Fixture, *service.Services, string) {
	t.Helper()
	ctx := context.Background()
	f := OpenFixture(t, nil)
	f.maxGroup = groupBound{calls: 1000, time: time.Hour}
	s := f.Services()
	p, err := s.Partners.CreatePartner(ctx, "P")
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Partners.CreateClient(ctx, p.ID, "DE", "EUR")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Partners.PutStore(ctx, c.ID, "S1", "Store S1"); err != nil {
		t.Fatal(err)
	}
	f.exec(t, fmt.Sprintf(`INSERT INTO stock (client_id, store_id, ean, article_number, quantity, price, upload_id,
		updated_at) VALUES ('%s', 'S1', '%s', 'A-1', 100000, 1999, 'u', 0)`, c.ID, groupEAN))
	return f, s, c.ID
}

func (f *Fixture) exec(t *testing.T, query string) {
	t.Helper()
	if err := f.TestAccess().Exec(context.Background(), query); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// createInOneGroup holds the turn until a create call for each number (and
// context) waits for it, then lets them go: they run one after the other in
// one group. Then it calls started, if not nil. It returns each call's
// error.
func createInOneGroup(t *testing.T, f *Fixture, s *service.Services, clientID string, numbers []string,
	ctxs []context.Context, started func()) []error {
	t.Helper()
	if err := f.orderTurn.take(context.Background()); err != nil {
		t.Fatal(err)
	}
	errs := make([]error, len(numbers))
	var wg sync.WaitGroup
	for i, number := range numbers {
		wg.Go(func() {
			_, errs[i] = s.Orders.CreateOrder(ctxs[i], storelink.NewOrder{OrderNumber: number, ClientID: clientID,
				Items: []storelink.NewItem{{EAN: groupEAN, MarketplaceArticleNumber: "M-1"}}})
		})
		// One at a time, so that they are let in in the order of numbers.
		waitFor(t, func() bool { return f.orderTurn.waiting() == i+1 })
	}
	f.orderTurn.give()
	if started != nil {
		started()
	}
	wg.Wait()
	return errs
}

// waitFor waits up to 10 s for ok.
func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// stored tells which of the numbers have an order and an event in the file.
func stored(t *testing.T, f *Fixture, numbers []string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, n := range numbers {
		rows, err := f.TestAccess().Query(context.Background(), `SELECT
			(SELECT count(*) FROM orders WHERE order_number = ?1) AS orders,
			(SELECT count(*) FROM events e JOIN orders o ON o.id = e.order_id WHERE o.order_number = ?1) AS events`, n)
		if err != nil {
			t.Fatal(err)
		}
		o, e := rows[0]["orders"], rows[0]["events"]
		if o != e || (o != "0" && o != "1") {
			t.Fatalf("order %s: %s orders and %s events stored", n, o, e)
		}
		out[n] = o == "1"
	}
	return out
}

func numbers(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(i)
	}
	return out
}

func background(n int) []context.Context {
	out := make([]context.Context, n)
	for i := range out {
		out[i] = context.Background()
	}
	return out
}

// A call of a group that fails after it wrote undoes its own writes only:
// the calls before and after it in the group are stored.
func TestGroupCallFailureUndoesItsOwnWrites(t *testing.T) {
	f, s, clientID := groupDB(t)
	// The bad order's item cannot be written, after its order row was.
	f.exec(t, `CREATE TRIGGER refuse_bad AFTER INSERT ON order_items
		WHEN (SELECT order_number FROM orders WHERE id = NEW.order_id) = 'BAD'
		BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`)
	nums := numbers("N-", 7)
	nums[3] = "BAD"
	errs := createInOneGroup(t, f, s, clientID, nums, background(len(nums)), nil)
	got := stored(t, f, nums)
	for i, n := range nums {
		switch {
		case n == "BAD" && (errs[i] == nil || got[n]):
			t.Errorf("the failing call: error %v, stored %v; want an error and nothing stored", errs[i], got[n])
		case n != "BAD" && (errs[i] != nil || !got[n]):
			t.Errorf("call %s of the group: error %v, stored %v; want it stored", n, errs[i], got[n])
		}
	}
}

// When the group's COMMIT fails, every call of the group is told so, none
// before the COMMIT, and nothing of them is stored; the next call commits.
func TestGroupCommitFailureFailsEveryCall(t *testing.T) {
	f, s, clientID := groupDB(t)
	// An order numbered FAIL leaves a row whose deferred foreign key fails
	// the COMMIT of its transaction.
	f.exec(t, `CREATE TABLE fail_parent (id TEXT PRIMARY KEY)`)
	f.exec(t, `CREATE TABLE fail_child (parent TEXT REFERENCES fail_parent (id) DEFERRABLE INITIALLY DEFERRED)`)
	f.exec(t, `CREATE TRIGGER fail_commit AFTER INSERT ON orders WHEN NEW.order_number = 'FAIL'
		BEGIN INSERT INTO fail_child VALUES ('nobody'); END`)
	nums := numbers("C-", 6)
	nums[2] = "FAIL"
	errs := createInOneGroup(t, f, s, clientID, nums, background(len(nums)), nil)
	got := stored(t, f, nums)
	for i, n := range nums {
		if errs[i] == nil || got[n] {
			t.Errorf("call %s of a group whose COMMIT failed: error %v, stored %v; want an error and nothing stored", n, errs[i], got[n])
		}
	}
	after := numbers("A-", 3)
	errs = createInOneGroup(t, f, s, clientID, after, background(len(after)), nil)
	got = stored(t, f, after)
	for i, n := range after {
		if errs[i] != nil || !got[n] {
			t.Errorf("call %s after the failed COMMIT: error %v, stored %v; want it stored", n, errs[i], got[n])
		}
	}
}

// Calls whose contexts end while their group runs fail or are stored, each
// as its answer says, and the calls of the group whose contexts do not end
// are all stored.
func TestGroupCallsGivenUpLeaveTheOthers(t *testing.T) {
	f, s, clientID := groupDB(t)
	for round := range 10 {
		nums := numbers(fmt.Sprintf("R%d-", round), 16)
		ctxs := background(len(nums))
		var cancels []context.CancelFunc
		for i := 0; i < len(nums); i += 2 {
			ctx, cancel := context.WithCancel(context.Background())
			ctxs[i], cancels = ctx, append(cancels, cancel)
		}
		// Given up at times spread over the group's run.
		errs := createInOneGroup(t, f, s, clientID, nums, ctxs, func() {
			for i, cancel := range cancels {
				time.AfterFunc(time.Duration(i)*300*time.Microsecond, cancel)
			}
		})
		got := stored(t, f, nums)
		for i, n := range nums {
			switch {
			case (errs[i] == nil) != got[n]:
				t.Errorf("call %s: error %v, stored %v", n, errs[i], got[n])
			case i%2 == 1 && errs[i] != nil:
				t.Errorf("call %s, in a group with calls given up: %v", n, errs[i])
			}
		}
	}
}
