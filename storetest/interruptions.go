package storetest

import (
	"fmt"
	"time"

	"storelink"
)

// testInterruptions: an upload whose claim is never given back (its
// process died) is claimed again when the lease is over and its backoff
// has passed, as often as that happens, each time counted as an
// interruption and never as a failure of its file; the client's later
// upload waits for it. Retry counts a failure, once per claim, and the
// upload, applied at last, is applied, not rejected.
func testInterruptions(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	u := e.accept("a.csv", 3)
	later := e.accept("b.csv", 3)
	backoff := storelink.InterruptedBackoff
	// nothingUntil checks that neither upload is claimable until wait has
	// passed (the claim takes an upload strictly after), then moves there.
	nothingUntil := func(wait time.Duration, what string) {
		t.Helper()
		e.clock.Advance(wait)
		if c, err := s.Uploads.Claim(ctx, "early", time.Minute); err != nil || c != nil {
			t.Fatalf("%s: claimed %v, %v; want nothing yet (b.csv waits behind a.csv)", what, c, err)
		}
		e.clock.Advance(time.Millisecond)
	}
	const deaths = 5 // more than MaxFailures of the processor
	for n := 1; n <= deaths+1; n++ {
		c, err := s.Uploads.Claim(ctx, "dying", time.Minute)
		must(t, err)
		if c == nil || c.ID != u.ID || c.Attempts != n || c.Failures != 0 || c.Interruptions() != n-1 {
			t.Fatalf("claim %d = %+v, want a.csv at attempt %d with %d interruptions and no failure", n, c, n, n-1)
		}
		if n <= deaths {
			// Never given back: its lease runs out, then its backoff.
			nothingUntil(time.Minute+backoff.Delay(n), fmt.Sprintf("during the lease and backoff of interruption %d", n))
			continue
		}
		// The last claim fails because of the file: counted once, even
		// when its give-back is sent twice.
		must(t, s.Uploads.Retry(ctx, c, 10*time.Second))
		must(t, s.Uploads.Retry(ctx, c, time.Hour))
		e.wantStatus(e.client.ID, u, storelink.UploadProcessing)
	}
	nothingUntil(10*time.Second+backoff.Delay(deaths), "after a failure")
	c, err := s.Uploads.Claim(ctx, "w", time.Minute)
	must(t, err)
	if c == nil || c.ID != u.ID || c.Attempts != deaths+2 || c.Failures != 1 || c.Interruptions() != deaths {
		t.Fatalf("claim after a failure = %+v, want a.csv at attempt %d with 1 failure and %d interruptions", c, deaths+2, deaths)
	}
	got, err := s.Uploads.Apply(ctx, c, rows(row("S1", "4006381333931", 1, 100)))
	must(t, err)
	if got.Status != storelink.UploadApplied {
		t.Fatalf("a.csv after %d interruptions and a failure is %s, want applied", deaths, got.Status)
	}
	c, err = s.Uploads.Claim(ctx, "w", time.Minute)
	must(t, err)
	if c == nil || c.ID != later.ID || c.Attempts != 1 || c.Failures != 0 {
		t.Fatalf("claim after a.csv = %+v, want b.csv at its first attempt", c)
	}
}
