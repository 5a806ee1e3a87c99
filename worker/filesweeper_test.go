package worker_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"storelink"
	"storelink/service"
	"storelink/sqlite"
	"storelink/worker"
)

// The sweeper removes, in the background, the files of uploads that were
// received longer ago than the retention, and leaves the rest.
func TestFileSweeperRemovesExpiredFiles(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "storelink.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	svc := service.New(sqlite.NewDrivers(db), service.WithClock(clock))
	p, err := svc.Partners.CreatePartner(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	c, err := svc.Partners.CreateClient(ctx, p.ID, "DE", "EUR")
	if err != nil {
		t.Fatal(err)
	}
	policy := storelink.CapacityPolicy{Base: 1 << 20, Window: time.Hour}
	accept := func() *storelink.Upload {
		u, _, err := svc.Uploads.Accept(ctx, storelink.NewUpload{ClientID: c.ID, FileName: "f.csv", Body: storelink.ChunksOf([]byte("store;ean\n"))}, policy)
		if err != nil {
			t.Fatal(err)
		}
		// Finished: set aside, as an upload that could not be processed.
		claim, err := svc.Uploads.Claim(ctx, "w", time.Minute)
		if err != nil || claim == nil || claim.ID != u.ID {
			t.Fatalf("claim = %+v, %v; want upload %s", claim, err, u.ID)
		}
		if err := svc.Uploads.Fail(ctx, claim, storelink.Problem{Type: "Processing failed", Message: "x", LineNumbers: []storelink.LineRef{}}); err != nil {
			t.Fatal(err)
		}
		return u
	}
	old := accept()
	mu.Lock()
	now = now.Add(6 * 24 * time.Hour)
	mu.Unlock()
	recent := accept()
	mu.Lock()
	now = now.Add(24*time.Hour + time.Second) // old is 7 days and a second old
	mu.Unlock()

	sweeper := &worker.FileSweeper{Uploads: svc.Uploads, Retention: worker.DefaultUploadRetention, Interval: 10 * time.Millisecond}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- sweeper.Run(runCtx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil once stopped", err)
		}
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, err := svc.Uploads.UploadFile(ctx, c.ID, old.ID)
		var e *storelink.Error
		if errors.As(err, &e) && e.Code == storelink.EGONE {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the file of an upload 7 days old is still there after 5 s: %v", err)
		}
	}
	if _, err := svc.Uploads.UploadFile(ctx, c.ID, recent.ID); err != nil {
		t.Fatalf("the file of an upload a day old: %v, want it kept", err)
	}
}
