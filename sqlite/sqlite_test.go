package sqlite_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"storelink"
	"storelink/service"
	"storelink/service/drivertest"
	"storelink/sqlite"
	"storelink/storetest"
)

// open is the conformance suite's opener: the package's test fixture, and
// a trigger to make event writes fail.
func open(t *testing.T, now func() time.Time) storetest.Fixture {
	t.Helper()
	db := sqlite.OpenFixture(t, now)
	return storetest.Fixture{
		Services: func(sealer *storelink.Sealer) *service.Services {
			return db.Services().With(service.WithSealer(sealer))
		},
		FailEvents: func(t *testing.T, state storelink.OrderState) func() {
			t.Helper()
			exec := func(query string) {
				t.Helper()
				if err := db.TestAccess().Exec(context.Background(), query); err != nil {
					t.Fatal(err)
				}
			}
			// A trigger aborts the INSERT inside the service's own
			// transaction, after the order and its items were written.
			when := ""
			if state != "" {
				when = "WHEN NEW.state = '" + string(state) + "' "
			}
			exec("CREATE TRIGGER fail_events BEFORE INSERT ON events " + when + "BEGIN SELECT RAISE(ABORT, 'injected event failure'); END")
			return func() { exec("DROP TRIGGER fail_events") }
		},
		Exec:      db.TestAccess().Exec,
		FillStock: db.TestAccess().FillStock,
		OneWriter: true,
	}
}

func TestConformance(t *testing.T) { storetest.Exercise(t, open) }

func TestDriver(t *testing.T) {
	drivertest.Exercise(t, func(t *testing.T) (service.Drivers, *service.Services) {
		db := sqlite.OpenFixture(t, time.Now)
		return sqlite.NewDrivers(db.DB), db.Services()
	})
}

// TestSecretsSealedAtRest: no column of endpoints, and no byte of the
// database files, holds a webhook secret (current or previous, with or
// without its whsec_ prefix) or an endpoint's x-api-key in clear.
func TestSecretsSealedAtRest(t *testing.T) {
	ctx := context.Background()
	db := sqlite.OpenFixture(t, func() time.Time { return time.Now().UTC() })
	webhooks := db.Services()
	p, err := webhooks.Partners.CreatePartner(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	c, err := webhooks.Partners.CreateClient(ctx, p.ID, "DE", "EUR")
	if err != nil {
		t.Fatal(err)
	}
	secret := func() (string, string) {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		enc := base64.StdEncoding.EncodeToString(b)
		return "whsec_" + enc, enc
	}
	first, firstKey := secret()
	second, secondKey := secret()
	ep, err := webhooks.Webhooks.CreateEndpoint(ctx, c.ID, storelink.NewEndpoint{URL: "https://a.test", APIKey: "partner-key-one-0123456789"}, first)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := webhooks.Webhooks.RotateSecret(ctx, "", ep.ID, storelink.SecretRotation{Secret: second, Overlap: time.Hour}); err != nil {
		t.Fatal(err)
	}
	// A second endpoint keeps the first key; the first gets a new one.
	if _, err := webhooks.Webhooks.CreateEndpoint(ctx, c.ID, storelink.NewEndpoint{URL: "https://b.test", APIKey: "partner-key-one-0123456789"}, first); err != nil {
		t.Fatal(err)
	}
	newKey := "partner-key-two-0123456789"
	if _, err := webhooks.Webhooks.UpdateEndpoint(ctx, "", ep.ID, storelink.EndpointPatch{APIKey: &newKey}); err != nil {
		t.Fatal(err)
	}
	clear := []string{first, firstKey, second, secondKey, "partner-key-one-0123456789", newKey}

	rows, err := db.TestAccess().Query(ctx, `SELECT * FROM endpoints`)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("%d endpoints stored, want 2", len(rows))
	}
	for _, row := range rows {
		for col, v := range row {
			for _, s := range clear {
				if strings.Contains(v, s) {
					t.Fatalf("column %s of endpoint %s holds a secret in clear", col, row["id"])
				}
			}
		}
		for _, col := range []string{"secret", "api_key"} {
			if !strings.HasPrefix(row[col], "sealed:") {
				t.Fatalf("column %s of endpoint %s = %q, want a sealed value", col, row["id"], row[col])
			}
		}
	}
	if rows[0]["previous_secret"] == "" && rows[1]["previous_secret"] == "" {
		t.Fatal("no previous secret stored after a rotation")
	}
	// Sealing uses a fresh nonce: the same secret is stored differently.
	if rows[0]["secret"] == rows[1]["secret"] || rows[0]["api_key"] == rows[1]["api_key"] {
		t.Fatal("two endpoints store a secret or key they share as the same bytes")
	}

	files, err := filepath.Glob(db.Path + "*")
	if err != nil || len(files) == 0 {
		t.Fatalf("database files: %v, %v", files, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range clear {
			if bytes.Contains(b, []byte(s)) {
				t.Fatalf("file %s holds a secret in clear", filepath.Base(f))
			}
		}
	}
}

func TestSecondOpenRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "storelink.db")
	db, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := sqlite.Open(context.Background(), path); err == nil {
		t.Fatal("a second Open of the same file succeeded; want it refused while the first holds it")
	}
}

// With a retention, an upload's files are gone once it has passed since
// the upload was received, before any sweep: the 410 comes on time. A
// file still waiting to be processed is kept.
func TestUploadRetentionAnswersGoneOnTime(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	f := sqlite.OpenFixture(t, func() time.Time { return now })
	svc := f.Services().With(service.WithUploadRetention(time.Hour))
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
		return u
	}
	done := accept()
	claim, err := svc.Uploads.Claim(ctx, "w", time.Minute)
	if err != nil || claim == nil {
		t.Fatalf("claim: %v, %v", claim, err)
	}
	if err := svc.Uploads.Fail(ctx, claim, storelink.Problem{Type: "Processing failed", Message: "x", LineNumbers: []storelink.LineRef{}}); err != nil {
		t.Fatal(err)
	}
	waiting := accept()
	now = now.Add(time.Hour - time.Millisecond)
	if _, err := svc.Uploads.UploadFile(ctx, c.ID, done.ID); err != nil {
		t.Fatalf("file a moment before the retention ends: %v", err)
	}
	now = now.Add(time.Millisecond)
	for _, read := range []func(context.Context, string, string) error{
		func(ctx context.Context, c, u string) error { _, err := svc.Uploads.UploadFile(ctx, c, u); return err },
		func(ctx context.Context, c, u string) error {
			_, err := svc.Uploads.UploadErrorFile(ctx, c, u)
			return err
		},
	} {
		err := read(ctx, c.ID, done.ID)
		var e *storelink.Error
		if !errors.As(err, &e) || e.Code != storelink.EGONE || !strings.Contains(e.Message, "2026-11-26T10:00:00.000Z") {
			t.Fatalf("a file when the retention has passed: %v, want gone since 10:00:00.000", err)
		}
	}
	if _, err := svc.Uploads.UploadFile(ctx, c.ID, waiting.ID); err != nil {
		t.Fatalf("the file of an upload still waiting: %v, want it kept", err)
	}
}
