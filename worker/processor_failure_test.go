package worker

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"storelink"
	"storelink/service"
	"storelink/sqlite"
)

const failureFeed = "store;ean;article_number;quantity;price\nS1;4006381333931;A;1;1.00\n"

// syncBuffer is a log destination that the workers may write to at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// accept stores a valid feed for client, which has store S1.
func (f *fixture) accept(clientID, body string) *storelink.Upload {
	f.t.Helper()
	u, _, err := f.service.Uploads.Accept(context.Background(), storelink.NewUpload{ClientID: clientID, FileName: "f.csv", Body: storelink.ChunksOf([]byte(body)), SHA256: "00"},
		storelink.CapacityPolicy{Base: 1 << 30, Window: time.Hour})
	if err != nil {
		f.t.Fatal(err)
	}
	return u
}

// waitFinal waits for an upload to be applied or rejected and returns it.
func (f *fixture) waitFinal(clientID string, u *storelink.Upload, limit time.Duration) *storelink.Upload {
	f.t.Helper()
	var got *storelink.Upload
	waitFor(f.t, limit, "upload "+u.ID+" applied or rejected", func() bool {
		var err error
		if got, err = f.service.Uploads.Upload(context.Background(), clientID, u.ID); err != nil {
			f.t.Fatal(err)
		}
		return got.Status.Final()
	})
	return got
}

// An upload whose apply panics, or fails with an error each time, is
// rejected as "Processing failed" after MaxFailures tries, and that upload
// alone: the client's later upload, another client's, and an upload sent
// after it are applied, by the same running processor. The panic is logged
// with the upload's id.
func TestProcessorFileFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		put  func(storelink.StockRow) error
		log  string
	}{
		{"panic", func(storelink.StockRow) error { panic("the row broke something") }, "the row broke something"},
		{"error", func(storelink.StockRow) error { return errors.New("constraint of the file") }, "constraint of the file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			ctx := context.Background()
			p2, err := f.service.Partners.CreatePartner(ctx, "Other")
			if err != nil {
				t.Fatal(err)
			}
			other, err := f.service.Partners.CreateClient(ctx, p2.ID, "FR", "EUR")
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []string{f.clientID, other.ID} {
				if _, _, err := f.service.Partners.PutStore(ctx, c, "S1", "Store"); err != nil {
					t.Fatal(err)
				}
			}
			bad := f.accept(f.clientID, failureFeed)
			behind := f.accept(f.clientID, failureFeed)
			beside := f.accept(other.ID, failureFeed)

			var logs syncBuffer
			p := NewProcessor(f.service.Uploads, slog.New(slog.NewTextHandler(&logs, nil)), "test", prometheus.NewRegistry())
			p.Interval, p.FailureDelay = 10*time.Millisecond, 10*time.Millisecond
			var tries atomic.Int32
			p.putHook = func(c *storelink.Claim, put func(storelink.StockRow) error) func(storelink.StockRow) error {
				if c.ID != bad.ID {
					return put
				}
				tries.Add(1)
				return tc.put
			}
			ctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { _ = p.Run(ctx); close(done) }()
			t.Cleanup(func() { cancel(); <-done })

			u := f.waitFinal(f.clientID, bad, 20*time.Second)
			if u.Status != storelink.UploadRejected || len(u.Errors) != 1 || u.Errors[0].Type != storelink.ProblemProcessing ||
				!strings.Contains(u.Errors[0].Message, "failed 3 times") {
				t.Fatalf("the failing upload is %s with %+v; want rejected as %q, failed 3 times", u.Status, u.Errors, storelink.ProblemProcessing)
			}
			if n := tries.Load(); n < MaxFailures {
				t.Errorf("the failing file was tried %d times, want at least %d", n, MaxFailures)
			}
			for name, w := range map[string]struct {
				client string
				u      *storelink.Upload
			}{"the client's later upload": {f.clientID, behind}, "another client's upload": {other.ID, beside}} {
				if got := f.waitFinal(w.client, w.u, 20*time.Second); got.Status != storelink.UploadApplied {
					t.Errorf("%s is %s, want applied", name, got.Status)
				}
			}
			after := f.accept(f.clientID, failureFeed)
			p.Wake()
			if got := f.waitFinal(f.clientID, after, 20*time.Second); got.Status != storelink.UploadApplied {
				t.Errorf("an upload sent after the failing one is %s, want applied by the same processor", got.Status)
			}
			if l := logs.String(); !strings.Contains(l, "upload_id="+bad.ID) || !strings.Contains(l, tc.log) {
				t.Errorf("the log does not tell the failure (%q) with upload_id=%s:\n%s", tc.log, bad.ID, l)
			}
		})
	}
}

// An upload whose claims are never given back (its process dies each time)
// is claimed again after each lease and backoff: more interruptions than
// MaxFailures and it is applied, not rejected; at MaxInterruptions it is
// set aside, its report saying its processing was interrupted, and the
// client's later upload goes ahead.
func TestProcessorInterruptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		deaths int
		want   storelink.UploadStatus
	}{
		{MaxFailures + 2, storelink.UploadApplied},
		{MaxInterruptions, storelink.UploadRejected},
	} {
		t.Run(string(tc.want), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "storelink.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			clock := struct {
				sync.Mutex
				t time.Time
			}{t: time.Now()}
			now := func() time.Time { clock.Lock(); defer clock.Unlock(); return clock.t }
			advance := func(d time.Duration) { clock.Lock(); clock.t = clock.t.Add(d); clock.Unlock() }
			svc := service.New(sqlite.NewDrivers(db), service.WithClock(now))
			p, err := svc.Partners.CreatePartner(ctx, "Acme")
			if err != nil {
				t.Fatal(err)
			}
			c, err := svc.Partners.CreateClient(ctx, p.ID, "DE", "EUR")
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := svc.Partners.PutStore(ctx, c.ID, "S1", "Store"); err != nil {
				t.Fatal(err)
			}
			f := &fixture{t: t, db: db, service: svc, clientID: c.ID}
			u := f.accept(c.ID, failureFeed)
			later := f.accept(c.ID, failureFeed)
			for n := 1; n <= tc.deaths; n++ {
				cl, err := svc.Uploads.Claim(ctx, "dying", time.Minute)
				if err != nil || cl == nil || cl.ID != u.ID {
					t.Fatalf("claim %d = %+v, %v; want the first upload", n, cl, err)
				}
				advance(time.Minute + storelink.InterruptedBackoff.Delay(n) + time.Millisecond)
			}

			proc := NewProcessor(svc.Uploads, nil, "test", prometheus.NewRegistry())
			for range 3 {
				if _, err := proc.RunOnce(ctx); err != nil {
					t.Fatal(err)
				}
			}
			got := f.waitFinal(c.ID, u, time.Second)
			if got.Status != tc.want {
				t.Fatalf("after %d interruptions the upload is %s with %+v, want %s", tc.deaths, got.Status, got.Errors, tc.want)
			}
			if tc.want == storelink.UploadRejected &&
				(len(got.Errors) != 1 || !strings.Contains(got.Errors[0].Message, "interrupted 20 times") || strings.Contains(got.Errors[0].Message, "failed")) {
				t.Errorf("set aside with %+v; want a problem saying its processing was interrupted 20 times, not that it failed", got.Errors)
			}
			if got := f.waitFinal(c.ID, later, time.Second); got.Status != storelink.UploadApplied {
				t.Errorf("the client's later upload is %s, want applied", got.Status)
			}
		})
	}
}
