package storetest

import (
	"crypto/rand"
	"errors"
	"slices"
	"strings"
	"time"

	"storelink"
)

// useSealer makes the case's services again, over the same database, with
// a sealer of another key, as a process started with that key has them.
func (e *env) useSealer(s *storelink.Sealer) {
	e.s = e.fixture.Services(s)
}

// newSealer returns a sealer with a fresh random key.
func newSealer(e *env) *storelink.Sealer {
	e.t.Helper()
	key := make([]byte, storelink.SealKeySize)
	_, _ = rand.Read(key)
	s, err := storelink.NewSealer(key)
	must(e.t, err)
	return s
}

// sealWithOtherKey replaces an endpoint's secret by one sealed with another
// key, as a process given another key would have stored it.
func (e *env) sealWithOtherKey(endpointID, column string) {
	e.t.Helper()
	sealed := newSealer(e).Seal(newSecret())
	must(e.t, e.fixture.Exec(e.ctx, `UPDATE endpoints SET `+column+` = '`+sealed+`' WHERE id = '`+endpointID+`'`))
}

// testUnsealableEndpoint: one endpoint whose secret cannot be opened holds
// up only its own deliveries: the claim succeeds, the other endpoint's job
// comes with its secret, the bad one's with the reason and nothing to sign
// with; recorded as the deliverer records it, the reason is the attempt's
// error, and the next claim is the next attempt, none counted that was not
// made.
func testUnsealableEndpoint(e *env) {
	t := e.t
	e.feed(row("S1", eanA, 10, 100))
	good, goodSecret := e.endpoint("https://good.test", "key-good")
	bad, _ := e.endpoint("https://bad.test", "key-bad")
	e.sealWithOtherKey(bad.ID, "secret")
	ev := e.eventOf(e.create(e.newOrder("U-1", eanA)).ID, storelink.StateAssigned)

	jobs := e.claim("w1", 100, 100)
	g, okG := jobFor(jobs, ev.EventID, good.ID)
	b, okB := jobFor(jobs, ev.EventID, bad.ID)
	if len(jobs) != 2 || !okG || !okB {
		t.Fatalf("claimed %s, want the event to both endpoints", describe(jobs...))
	}
	if g.Unsealable != "" || g.APIKey != "key-good" || !slices.Equal(g.Secrets, []string{goodSecret}) || g.Attempt != 1 {
		t.Fatalf("the good endpoint's job = %+v, want its key and secret", g)
	}
	if b.Unsealable != storelink.UnsealableReason || len(b.Secrets) != 0 || b.APIKey != "" || b.Attempt != 1 || b.Try != 1 {
		t.Fatalf("the bad endpoint's job: unsealable %q, %d secrets, api key %q, attempt %d; want the reason and nothing to sign with",
			b.Unsealable, len(b.Secrets), b.APIKey, b.Attempt)
	}

	e.clock.Advance(time.Second)
	rBad := e.result(b, storelink.OutcomeRetry, 0)
	rBad.Attempt.Error, rBad.Attempt.DurationMS, rBad.NextAt = b.Unsealable, 0, e.clock.Now().Add(5*time.Second)
	e.record(e.result(g, storelink.OutcomeSucceeded, 204), rBad)
	e.wantDelivery(g.DeliveryID, storelink.DeliverySucceeded, nil, 1)
	d := e.wantDelivery(b.DeliveryID, storelink.DeliveryPending, &rBad.NextAt, 1)
	if d.Attempts[0].Error != storelink.UnsealableReason || d.Attempts[0].StatusCode != 0 {
		t.Fatalf("the bad delivery's attempt = %+v, want the reason and no status", d.Attempts[0])
	}

	// The next order's event to the good endpoint goes as usual; the bad
	// delivery's next attempt is its second.
	ev2 := e.eventOf(e.create(e.newOrder("U-2", eanA)).ID, storelink.StateAssigned)
	e.clock.Advance(5 * time.Second)
	jobs = e.claim("w1", 100, 100)
	g2, okG := jobFor(jobs, ev2.EventID, good.ID)
	b2, okB := jobFor(jobs, ev.EventID, bad.ID)
	if !okG || g2.Unsealable != "" || !okB || b2.Attempt != 2 || b2.Try != 2 || b2.Unsealable == "" {
		t.Fatalf("second claim %s\nwant U-2 to the good endpoint and attempt 2 of U-1 to the bad one", describe(jobs...))
	}
}

// testSecretKeyCheck: the check value is recorded by the first key that
// opens the database's secrets and refused to any other; a rotation seals
// every secret in use again in one transaction, drops previous secrets no
// longer used, and changes nothing when one secret in use cannot be opened.
func testSecretKeyCheck(e *env) {
	t, ctx := e.t, e.ctx
	a, b, c := newSealer(e), newSealer(e), newSealer(e)
	e.useSealer(a)
	e1, _ := e.endpoint("https://one.test", "key-one")
	s1 := newSecret()
	_, err := e.s.Webhooks.RotateSecret(ctx, "", e1.ID, storelink.SecretRotation{Secret: s1, Overlap: time.Hour})
	must(t, err)
	e2, s2 := e.endpoint("https://two.test", "")

	checkIs := func(want string) {
		t.Helper()
		got, err := e.s.SecretKeys.SecretKeyCheck(ctx)
		must(t, err)
		if got != want {
			t.Fatalf("recorded check value %q, want %q", got, want)
		}
	}
	mismatch := func(err error, key, db *storelink.Sealer) {
		t.Helper()
		var m *storelink.SecretKeyMismatch
		want := ""
		if db != nil {
			want = db.Fingerprint()
		}
		if !errors.As(err, &m) || m.Key != key.Fingerprint() || m.Database != want {
			t.Fatalf("error %v, want a mismatch of key %s with the database's %q", err, key.Fingerprint(), want)
		}
	}

	// Before any is recorded: a key that opens none is refused, and
	// nothing recorded; the key that sealed them is recorded.
	checkIs("")
	_, err = storelink.VerifySecretKey(ctx, e.s.SecretKeys, b)
	mismatch(err, b, nil)
	checkIs("")
	closed, err := storelink.VerifySecretKey(ctx, e.s.SecretKeys, a)
	must(t, err)
	if len(closed) != 0 {
		t.Fatalf("the sealing key cannot open %+v", closed)
	}
	checkIs(a.Check())
	_, err = storelink.VerifySecretKey(ctx, e.s.SecretKeys, b)
	mismatch(err, b, a)
	if got, err := e.s.SecretKeys.RecordSecretKeyCheck(ctx, b.Check()); err != nil || got != a.Check() {
		t.Fatalf("recording another check value = %q, %v; want the first kept", got, err)
	}
	_, err = storelink.RotateSecretKey(ctx, e.s.SecretKeys, b, c)
	mismatch(err, b, a)

	// Rotated: the new key opens everything, with the same plain values.
	n, err := storelink.RotateSecretKey(ctx, e.s.SecretKeys, a, c)
	must(t, err)
	if n != 4 { // e1's key, secret and previous secret; e2's secret
		t.Fatalf("rotation sealed %d values again, want 4", n)
	}
	checkIs(c.Check())
	if _, err := e.s.SecretKeys.ResealSecrets(ctx, a.Check(), b.Check(), func(v storelink.SealedValue) (string, error) { return v.Value, nil }); storelink.ErrorCode(err) != storelink.ECONFLICT {
		t.Fatalf("a second rotation from the old key = %v, want a conflict", err)
	}
	e.useSealer(c)
	e.feed(row("S1", eanA, 10, 100))
	ev := e.eventOf(e.create(e.newOrder("K-1", eanA)).ID, storelink.StateAssigned)
	jobs := e.claim("w1", 100, 100)
	j1, ok1 := jobFor(jobs, ev.EventID, e1.ID)
	j2, ok2 := jobFor(jobs, ev.EventID, e2.ID)
	if !ok1 || !ok2 || j1.APIKey != "key-one" || len(j1.Secrets) != 2 || j1.Secrets[0] != s1 || !slices.Equal(j2.Secrets, []string{s2}) ||
		j1.Unsealable != "" || j2.Unsealable != "" {
		t.Fatalf("after the rotation claimed %s\nwant both endpoints with their secrets", describe(jobs...))
	}

	// One secret in use that the key cannot open: nothing changes, and the
	// error names it.
	e.sealWithOtherKey(e2.ID, "secret")
	_, err = storelink.RotateSecretKey(ctx, e.s.SecretKeys, c, b)
	if storelink.ErrorCode(err) != storelink.EUNPROCESSABLE || !strings.Contains(err.Error(), e2.ID) {
		t.Fatalf("rotation with endpoint %s's secret unopenable = %v, want an error naming it", e2.ID, err)
	}
	checkIs(c.Check())

	// A database without a check value whose key opens some of its
	// secrets takes the key, and names those it cannot open.
	must(t, e.fixture.Exec(ctx, `DELETE FROM settings`))
	closed, err = storelink.VerifySecretKey(ctx, e.s.SecretKeys, c)
	must(t, err)
	if len(closed) != 1 || closed[0].EndpointID != e2.ID || closed[0].Field != storelink.SealedSecret {
		t.Fatalf("secrets the key cannot open: %+v, want endpoint %s's secret", closed, e2.ID)
	}
	checkIs(c.Check())

	// The operator's way out: a new secret for the endpoint; once the
	// overlap is over, its old one is no longer in the way, and the
	// rotation drops it.
	_, err = e.s.Webhooks.RotateSecret(ctx, "", e2.ID, storelink.SecretRotation{Secret: newSecret(), Overlap: time.Hour})
	must(t, err)
	if _, err = storelink.RotateSecretKey(ctx, e.s.SecretKeys, c, b); storelink.ErrorCode(err) != storelink.EUNPROCESSABLE {
		t.Fatalf("rotation while the unopenable secret still signs = %v, want refused", err)
	}
	e.clock.Advance(time.Hour + time.Second)
	n, err = storelink.RotateSecretKey(ctx, e.s.SecretKeys, c, b)
	must(t, err)
	if n != 3 { // e1's key and secret, e2's new secret
		t.Fatalf("rotation sealed %d values again, want 3", n)
	}
	values, err := e.s.SecretKeys.SealedValues(ctx)
	must(t, err)
	for _, v := range values {
		if _, err := b.Open(v.Value); err != nil {
			t.Fatalf("after the rotation %+v does not open with the new key", v)
		}
	}
}
