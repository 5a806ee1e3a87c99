package service_test

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"storelink"
)

const endpointSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// sealedValues lists the database's sealed values by endpoint and field.
func sealedValues(t *testing.T, db database) []storelink.SealedValue {
	t.Helper()
	vs, err := db.svc.SecretKeys.SealedValues(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(vs, func(a, b storelink.SealedValue) int {
		return cmp.Or(cmp.Compare(a.EndpointID, b.EndpointID), cmp.Compare(a.Field, b.Field))
	})
	return vs
}

// The first check value recorded stays; a reseal moves every sealed value,
// counts the live ones and records the new check value, all or nothing,
// and only from the check value recorded.
func TestResealSecretsAllOrNothing(t *testing.T) {
	eachDatabase(t, func(t *testing.T, db database) {
		ctx := context.Background()
		c := client(t, db)
		keyed, err := db.svc.Webhooks.CreateEndpoint(ctx, c.ID, storelink.NewEndpoint{URL: "https://a.test/", APIKey: "key"}, endpointSecret)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.svc.Webhooks.RotateSecret(ctx, "", keyed.ID, storelink.SecretRotation{Secret: "whsec_QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=", Overlap: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.svc.Webhooks.CreateEndpoint(ctx, c.ID, storelink.NewEndpoint{URL: "https://b.test/"}, endpointSecret); err != nil {
			t.Fatal(err)
		}
		db.clock.advance(2 * time.Hour) // the rotated-out secret's overlap is over
		before := sealedValues(t, db)
		if len(before) != 4 || !slices.ContainsFunc(before, func(v storelink.SealedValue) bool { return !v.Live }) {
			t.Fatalf("sealed values = %+v, want 4: a key, two secrets and one spent previous secret", before)
		}

		for _, check := range []string{"check-a", "check-b"} {
			got, err := db.svc.SecretKeys.RecordSecretKeyCheck(ctx, check)
			if err != nil || got != "check-a" {
				t.Fatalf("RecordSecretKeyCheck(%s) = %q, %v; want the first, check-a", check, got, err)
			}
		}

		mark := func(v storelink.SealedValue) (string, error) { return v.Value + "!", nil }
		_, err = db.svc.SecretKeys.ResealSecrets(ctx, "check-b", "check-c", mark)
		mustFailWith(t, "a reseal from a check value not recorded", err, storelink.ECONFLICT)
		failing := errors.New("cannot seal")
		calls := 0
		_, err = db.svc.SecretKeys.ResealSecrets(ctx, "check-a", "check-c", func(v storelink.SealedValue) (string, error) {
			if calls++; calls == 3 {
				return "", failing
			}
			return v.Value + "!", nil
		})
		if !errors.Is(err, failing) {
			t.Fatalf("a reseal whose third value fails = %v, want its error", err)
		}
		if after := sealedValues(t, db); !slices.Equal(after, before) {
			t.Fatalf("after a failed reseal the values are %+v, want %+v as they were", after, before)
		}
		if check, err := db.svc.SecretKeys.SecretKeyCheck(ctx); err != nil || check != "check-a" {
			t.Fatalf("check value after failed reseals = %q, %v; want check-a", check, err)
		}

		n, err := db.svc.SecretKeys.ResealSecrets(ctx, "check-a", "check-c", mark)
		if err != nil || n != 3 {
			t.Fatalf("ResealSecrets = %d, %v; want the 3 live values", n, err)
		}
		want := slices.Clone(before)
		for i := range want {
			want[i].Value += "!"
		}
		if after := sealedValues(t, db); !slices.Equal(after, want) {
			t.Fatalf("after the reseal %+v, want each of %+v sealed again", after, before)
		}
		if check, err := db.svc.SecretKeys.SecretKeyCheck(ctx); err != nil || check != "check-c" {
			t.Fatalf("check value after the reseal = %q, %v; want check-c", check, err)
		}
	})
}

// Once the database's key is another than this process's, the process
// seals nothing more, where another process can change it (PostgreSQL);
// a database that one process holds cannot change key under it.
func TestSealingRefusedWithAStaleKey(t *testing.T) {
	eachDatabase(t, func(t *testing.T, db database) {
		ctx := context.Background()
		c := client(t, db)
		if err := db.svc.SecretKeys.SecretKeyCurrent(ctx); err != nil {
			t.Fatalf("SecretKeyCurrent with none recorded: %v", err)
		}
		if _, err := db.svc.SecretKeys.RecordSecretKeyCheck(ctx, "another key's check"); err != nil {
			t.Fatal(err)
		}
		err := db.svc.SecretKeys.SecretKeyCurrent(ctx)
		_, created := db.svc.Webhooks.CreateEndpoint(ctx, c.ID, storelink.NewEndpoint{URL: "https://a.test/"}, endpointSecret)
		if db.name == "sqlite" {
			if err != nil || created != nil {
				t.Fatalf("on a database one process holds: SecretKeyCurrent %v, CreateEndpoint %v; want both to go on", err, created)
			}
			return
		}
		mustFailWith(t, "SecretKeyCurrent after the key moved", err, storelink.EUNAVAILABLE)
		mustFailWith(t, "CreateEndpoint after the key moved", created, storelink.EUNAVAILABLE)
	})
}
