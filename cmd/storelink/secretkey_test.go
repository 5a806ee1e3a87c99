package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"storelink"
	"storelink/service"
	"storelink/sqlite"
)

// commitWatch is the database's secret-key store, with a look at the data
// folder just before the rotation's transaction commits.
type commitWatch struct {
	storelink.SecretKeyStore
	before func()
	called bool
}

func (w *commitWatch) ResealSecrets(ctx context.Context, oldCheck, newCheck string, reseal func(storelink.SealedValue) (string, error)) (int, error) {
	w.called = true
	w.before()
	return w.SecretKeyStore.ResealSecrets(ctx, oldCheck, newCheck, reseal)
}

// keyDB opens a SQLite database in dir whose secrets are recorded as
// sealed with a new key, and returns it with that key.
func keyDB(t *testing.T, dir string) (*service.Services, *storelink.Sealer, string) {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(dir, "storelink.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	svc := service.New(sqlite.NewDrivers(db))
	hexKey := randomHex(storelink.SealKeySize)
	current, err := parseSecretKey(hexKey, "the test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SecretKeys.RecordSecretKeyCheck(context.Background(), current.Check()); err != nil {
		t.Fatal(err)
	}
	return svc, current, hexKey
}

// TestSecretKeyRotateWritesTheKeyFirst: when the database commits to the
// new key, the key is already in <data>/secret-key.new, mode 0600, whole,
// and the old key still in <data>/secret-key; after the commit the new key
// takes its place and the old one is kept aside.
func TestSecretKeyRotateWritesTheKeyFirst(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	svc, current, currentHex := keyDB(t, data)
	path := filepath.Join(data, "secret-key")
	if err := writeSecretFile(data, path, currentHex); err != nil {
		t.Fatal(err)
	}
	var staged string
	w := &commitWatch{SecretKeyStore: svc.SecretKeys, before: func() {
		fi, err := os.Stat(path + ".new")
		if err != nil {
			t.Fatalf("no staged key when the database commits: %v", err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("the staged key's mode is %v, want 0600", fi.Mode().Perm())
		}
		b, _ := os.ReadFile(path + ".new")
		staged = strings.TrimSpace(string(b))
		if next, err := parseSecretKey(staged, "the staged file"); err != nil || next.Check() == current.Check() {
			t.Errorf("the staged file holds no new key (%v) when the database commits", err)
		}
		if got := readKeyFile(t, path); got != currentHex {
			t.Error("the key file no longer holds the database's key before the commit")
		}
	}}
	c := &config{Data: data}
	if err := rotateKey(ctx, w, current, "the file "+path, "", c, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !w.called {
		t.Fatal("the rotation never reached the database")
	}
	next, err := parseSecretKey(readKeyFile(t, path), "the key file")
	if err != nil || readKeyFile(t, path) != staged {
		t.Fatalf("the key file does not hold the staged key after the rotation (%v)", err)
	}
	if check, _ := svc.SecretKeys.SecretKeyCheck(ctx); check != next.Check() {
		t.Error("the database is not on the key in the file")
	}
	if old := readKeyFile(t, path+"."+current.Fingerprint()+".old"); old != currentHex {
		t.Error("the old key is not kept aside")
	}
	if _, err := os.Stat(path + ".new"); !os.IsNotExist(err) {
		t.Errorf("the staged file is still there: %v", err)
	}
}

// TestSecretKeyRotateFileFailure: a new key that cannot be written leaves
// the database on its key, untouched: the data folder cannot be made (its
// parent is a file, which fails as root too), or a staged key of a rotation
// that stopped half way is in the way (and is left as it was).
func TestSecretKeyRotateFileFailure(t *testing.T) {
	ctx := context.Background()
	t.Run("folder cannot be made", func(t *testing.T) {
		dir := t.TempDir()
		svc, current, currentHex := keyDB(t, dir)
		blocker := filepath.Join(dir, "file")
		if err := os.WriteFile(blocker, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		w := &commitWatch{SecretKeyStore: svc.SecretKeys, before: func() {}}
		c := &config{Data: filepath.Join(blocker, "data"), SecretKey: currentHex}
		err := rotateKey(ctx, w, current, "--secret-key", "", c, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "write the new key") {
			t.Fatalf("rotate = %v, want the key file's failure", err)
		}
		if check, _ := svc.SecretKeys.SecretKeyCheck(ctx); w.called || check != current.Check() {
			t.Errorf("the database was asked to commit (%v), or is not on its old key", w.called)
		}
	})
	t.Run("staged key in the way", func(t *testing.T) {
		data := t.TempDir()
		svc, current, currentHex := keyDB(t, data)
		path := filepath.Join(data, "secret-key")
		if err := writeSecretFile(data, path, currentHex); err != nil {
			t.Fatal(err)
		}
		leftover := randomHex(storelink.SealKeySize)
		if err := writeSecretFile(data, path+".new", leftover); err != nil {
			t.Fatal(err)
		}
		w := &commitWatch{SecretKeyStore: svc.SecretKeys, before: func() {}}
		err := rotateKey(ctx, w, current, "the file "+path, "", &config{Data: data}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "a rotation may have stopped half way") {
			t.Fatalf("rotate = %v, want the staged file named", err)
		}
		if check, _ := svc.SecretKeys.SecretKeyCheck(ctx); w.called || check != current.Check() {
			t.Errorf("the database was asked to commit (%v), or is not on its old key", w.called)
		}
		if readKeyFile(t, path+".new") != leftover || readKeyFile(t, path) != currentHex {
			t.Error("the key files were changed")
		}
	})
}
