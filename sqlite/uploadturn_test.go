package sqlite

import (
	"context"
	"errors"
	"testing"
	"time"

	"storelink"
)

// lineLen is how many wait in the turn's line.
func lineLen(t *uploadTurn) int { return t.waiting() }

// waitLine waits until n wait in the line, failing after a deadline.
func waitLine(tb testing.TB, t *uploadTurn, n int) {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for lineLen(t) != n {
		if time.Now().After(deadline) {
			tb.Fatalf("%d wait for the turn, want %d", lineLen(t), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestUploadTurnFirstComeFirstServed: the turn goes to the waiters in the
// order they came, and a waiter whose context ends leaves the line without
// holding up the others.
func TestUploadTurnFirstComeFirstServed(t *testing.T) {
	turn := &uploadTurn{}
	ctx := context.Background()
	if err := turn.take(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan int, 5)
	quit, cancel := context.WithCancel(ctx)
	defer cancel()
	leaving := make(chan error, 1)
	for i := range 5 {
		if i == 2 {
			go func() { leaving <- turn.take(quit) }()
		} else {
			go func() {
				if err := turn.take(ctx); err != nil {
					t.Error(err)
				}
				got <- i
				turn.give()
			}()
		}
		waitLine(t, turn, i+1)
	}
	cancel()
	if err := <-leaving; !errors.Is(err, context.Canceled) {
		t.Fatalf("take with its context ended = %v, want context.Canceled", err)
	}
	waitLine(t, turn, 4)
	turn.give()
	for _, want := range []int{0, 1, 3, 4} {
		if i := <-got; i != want {
			t.Fatalf("turn taken by waiter %d, want %d", i, want)
		}
	}
	if err := turn.take(ctx); err != nil { // free again
		t.Fatal(err)
	}
}

// TestUploadTurnAhead: a takeAhead waiter is let in before take's waiters
// that came before it, and behind the takeAhead waiters before it.
func TestUploadTurnAhead(t *testing.T) {
	turn := &uploadTurn{}
	ctx := context.Background()
	if err := turn.take(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 4)
	for i, w := range []struct {
		name  string
		ahead bool
	}{{"claim", false}, {"cancel 1", true}, {"accept", false}, {"cancel 2", true}} {
		go func() {
			take := turn.take
			if w.ahead {
				take = turn.takeAhead
			}
			if err := take(ctx); err != nil {
				t.Error(err)
			}
			got <- w.name
			turn.give()
		}()
		waitLine(t, turn, i+1)
	}
	turn.give()
	for _, want := range []string{"cancel 1", "cancel 2", "claim", "accept"} {
		if name := <-got; name != want {
			t.Fatalf("turn taken by %s, want %s", name, want)
		}
	}
}

// TestCancelBeforeEarlierClaim: while an apply holds the write turn, a
// cancel of the client's next upload, sent after a processor asked for a
// claim, is made first: the upload is cancelled, not picked up, and the
// claim finds nothing of that client to take.
func TestCancelBeforeEarlierClaim(t *testing.T) {
	f := OpenFixture(t, nil)
	s, ctx := f.Services(), context.Background()
	p, err := s.Partners.CreatePartner(ctx, "P")
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Partners.CreateClient(ctx, p.ID, "DE", "EUR")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Partners.PutStore(ctx, c.ID, "S1", "Store"); err != nil {
		t.Fatal(err)
	}
	policy := storelink.CapacityPolicy{Base: 1 << 20, Window: time.Hour}
	accept := func(name string) *storelink.Upload {
		u, _, err := s.Uploads.Accept(ctx, storelink.NewUpload{ClientID: c.ID, FileName: name, Body: storelink.ChunksOf([]byte(name)), SHA256: "00"}, policy)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	first, waiting := accept("first.csv"), accept("waiting.csv")
	claim, err := s.Uploads.Claim(ctx, "w1", time.Minute)
	if err != nil || claim == nil || claim.ID != first.ID {
		t.Fatalf("claim = %+v, %v; want upload %s", claim, err, first.ID)
	}
	inside, release, applied := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		_, err := s.Uploads.Apply(ctx, claim, func(_ map[string]bool, put func(storelink.StockRow) error) (storelink.FeedReport, error) {
			if err := put(storelink.StockRow{StoreID: "S1", EAN: "4006381333931", ArticleNumber: "A", Quantity: 1, Price: 100}); err != nil {
				return storelink.FeedReport{}, err
			}
			close(inside)
			<-release
			return storelink.FeedReport{RowsTotal: 1, RowsApplied: 1}, nil
		})
		applied <- err
	}()
	<-inside
	turn := f.DB.uploadTurn
	claimed := make(chan []*storelink.Claim, 1)
	go func() {
		cs, err := s.Uploads.ClaimBatch(ctx, "w2", time.Minute, storelink.BatchLimit{Uploads: 10, Bytes: 1 << 20})
		if err != nil {
			t.Error(err)
		}
		claimed <- cs
	}()
	waitLine(t, turn, 1) // the claim waits for the apply
	cancelled := make(chan error, 1)
	go func() {
		u, err := s.Uploads.Cancel(ctx, c.ID, waiting.ID, policy)
		if err == nil && u.Status != storelink.UploadCancelled {
			err = errors.New("cancel answered " + string(u.Status))
		}
		cancelled <- err
	}()
	waitLine(t, turn, 2) // and the cancel too
	close(release)
	if err := <-applied; err != nil {
		t.Fatal(err)
	}
	if err := <-cancelled; err != nil {
		t.Fatalf("cancel of the waiting upload, sent after the claim asked: %v", err)
	}
	if cs := <-claimed; len(cs) != 0 {
		t.Fatalf("claim took %s, want nothing: its upload was cancelled before", cs[0].ID)
	}
}
