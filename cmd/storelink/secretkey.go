package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"storelink"
	"storelink/service"
)

// fromValue is a string flag that records where its value came from: the
// variable while the environment is applied, the flag itself while the
// command line is parsed. (fs.Visit cannot tell the two apart: fs.Set,
// which applies the environment, marks a flag as set too.)
type fromValue struct {
	p, from *string
	source  string
}

func (v *fromValue) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return *v.p
}

func (v *fromValue) Set(s string) error {
	*v.p, *v.from = s, v.source
	return nil
}

// secretKeyFlag defines --secret-key on fs; its source is the variable
// until the caller sets it to the flag before parsing the command line.
func secretKeyFlag(fs *flag.FlagSet, c *config, usage string) *fromValue {
	v := &fromValue{p: &c.SecretKey, from: &c.secretKeyFrom, source: "STORELINK_SECRET_KEY"}
	fs.Var(v, "secret-key", usage)
	return v
}

// secretKeyPath is where serve keeps the key it generates.
func secretKeyPath(c *config) string { return filepath.Join(c.Data, "secret-key") }

// findSecretKey returns the key as serve finds it, in hex, and where it came
// from: the flag or the variable, else the file in the data folder; "" when
// there is none.
func findSecretKey(c *config) (hexKey, from string, err error) {
	if c.SecretKey != "" {
		from := c.secretKeyFrom
		if from == "" {
			from = "--secret-key"
		}
		return c.SecretKey, from, nil
	}
	path := secretKeyPath(c)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		return strings.TrimSpace(string(b)), "the file " + path, nil
	case errors.Is(err, os.ErrNotExist):
		return "", "", nil
	}
	return "", "", fmt.Errorf("read secret key: %w", err)
}

// parseSecretKey makes the sealer of a key in hex.
func parseSecretKey(hexKey, from string) (*storelink.Sealer, error) {
	key, err := hex.DecodeString(hexKey)
	if err != nil || len(key) != storelink.SealKeySize {
		return nil, usageError{fmt.Errorf("the secret key from %s must be 64 hex digits (32 bytes)", from)}
	}
	return storelink.NewSealer(key)
}

// useSecretKey returns the services over db that seal webhook secrets with
// the secret key: the configured key, or the one kept in the data folder,
// generated on first use if the database has no key yet. A key that is not
// the one the database's secrets are sealed with is refused (exit 2) before
// anything is served: several processes on one PostgreSQL database must
// share one key.
func useSecretKey(ctx context.Context, c *config, db *service.Services, stdout io.Writer) (*service.Services, error) {
	hexKey, from, err := findSecretKey(c)
	if err != nil {
		return nil, err
	}
	generated := ""
	if hexKey == "" {
		recorded, err := db.SecretKeys.SecretKeyCheck(ctx)
		if err != nil {
			return nil, fmt.Errorf("read the secret key's check value: %w", err)
		}
		if recorded != "" {
			return nil, usageError{fmt.Errorf("no secret key was given (--secret-key, STORELINK_SECRET_KEY or the file %s), and the database's "+
				"webhook secrets are sealed with the key of fingerprint %s: start serve with that key", secretKeyPath(c), storelink.KeyFingerprint(recorded))}
		}
		generated = secretKeyPath(c)
		hexKey, from = randomHex(storelink.SealKeySize), "the file "+generated
		if err := writeSecretFile(c.Data, generated, hexKey); err != nil {
			return nil, fmt.Errorf("write secret key: %w", err)
		}
	}
	sealer, err := parseSecretKey(hexKey, from)
	if err != nil {
		return nil, err
	}
	closed, err := storelink.VerifySecretKey(ctx, db.SecretKeys, sealer)
	if err != nil {
		if generated != "" {
			// A key that sealed nothing is not left to be found next time.
			os.Remove(generated)
		}
		return nil, keyMismatch(err, from, c)
	}
	if generated != "" {
		fmt.Fprintf(stdout, "storelink: generated a secret key in %s (it encrypts webhook secrets; back it up with the database)\n", generated)
	}
	fmt.Fprintf(stdout, "storelink: secret key %s from %s\n", sealer.Fingerprint(), from)
	if len(closed) > 0 {
		fmt.Fprintf(stdout, "storelink: the secret key cannot open the stored secrets of %s: their deliveries fail until each endpoint's "+
			"secret is rotated (and its api_key set again)\n", describeSealed(closed))
	}
	return db.With(service.WithSealer(sealer)), nil
}

// keyMismatch turns a SecretKeyMismatch into a usage error that says which
// key was given, which the database has, and what to do.
func keyMismatch(err error, from string, c *config) error {
	var m *storelink.SecretKeyMismatch
	if !errors.As(err, &m) {
		return err
	}
	fix := fmt.Sprintf("start with the key the database was sealed with (--secret-key, STORELINK_SECRET_KEY or the file %s)", secretKeyPath(c))
	if m.Database == "" {
		return usageError{fmt.Errorf("the secret key from %s (fingerprint %s) opens none of the %d webhook secrets sealed in the database: %s",
			from, m.Key, m.Sealed, fix)}
	}
	return usageError{fmt.Errorf("the secret key from %s (fingerprint %s) is not the one the database's webhook secrets are sealed with "+
		"(fingerprint %s): %s, or move the database to a new key with `storelink secret-key rotate`, given its current key",
		from, m.Key, m.Database, fix)}
}

// installKey puts the staged new key in the place of the current one,
// after the database committed to it: the old key is kept aside as
// <path>.<fingerprint>.old, and the folder is synced so that the renames
// survive a power cut. It returns where the old key is.
func installKey(path, staged string, current, next *storelink.Sealer) (string, error) {
	old := path + "." + current.Fingerprint() + ".old"
	if err := os.Rename(path, old); err != nil {
		return "", fmt.Errorf("the database is on the new key (fingerprint %s), which is in %s; keep the old key aside and move it to %s: %w",
			next.Fingerprint(), staged, path, err)
	}
	if err := os.Rename(staged, path); err != nil {
		return "", fmt.Errorf("the database is on the new key (fingerprint %s), which is in %s; move it to %s: %w",
			next.Fingerprint(), staged, path, err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return "", fmt.Errorf("the database is on the new key (fingerprint %s), now in %s, but its folder could not be synced: %w",
			next.Fingerprint(), path, err)
	}
	return old, nil
}

func describeSealed(values []storelink.SealedValue) string {
	parts := make([]string, len(values))
	for i, v := range values {
		parts[i] = fmt.Sprintf("endpoint %s (%s)", v.EndpointID, v.Field)
	}
	return strings.Join(parts, ", ")
}

const secretKeyUsage = `Usage:
  storelink secret-key rotate [--data DIR] [--database URL] [--secret-key HEX] [--new-key HEX]
      seal every stored secret with a new key, in one transaction; stop every serve first
  storelink secret-key check [--data DIR] [--database URL] [--secret-key HEX]
      tell whether the key is the one the database's secrets are sealed with

The current key is found as serve finds it: --secret-key, STORELINK_SECRET_KEY,
or the file <data>/secret-key.
`

// secretKeyCommand runs `storelink secret-key rotate|check`.
func secretKeyCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "rotate" && args[0] != "check") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(stdout, secretKeyUsage)
			return nil
		}
		fmt.Fprint(stderr, secretKeyUsage)
		return usageError{errors.New("say rotate or check")}
	}
	c, newKey, err := parseKeyConfig(args[0], args[1:], getenv, stderr)
	if err != nil {
		return err
	}
	db, _, err := openDB(ctx, c)
	if err != nil {
		return err
	}
	defer db.Close()
	hexKey, from, err := findSecretKey(c)
	if err != nil {
		return err
	}
	if hexKey == "" {
		return usageError{fmt.Errorf("no secret key: give the database's current key with --secret-key, STORELINK_SECRET_KEY or the file %s",
			secretKeyPath(c))}
	}
	current, err := parseSecretKey(hexKey, from)
	if err != nil {
		return err
	}
	if args[0] == "check" {
		return checkKey(ctx, db.SecretKeys, current, from, c, stdout)
	}
	return rotateKey(ctx, db.SecretKeys, current, from, newKey, c, stdout)
}

// parseKeyConfig reads the flags of secret-key rotate and check: where the
// database is and the keys, each with its variable.
func parseKeyConfig(name string, args []string, getenv func(string) string, stderr io.Writer) (*config, string, error) {
	c := &config{Data: "./storelink-data"}
	var newKey string
	fs := flag.NewFlagSet("storelink secret-key "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.Data, "data", c.Data, "data folder, where serve keeps <data>/secret-key (STORELINK_DATA)")
	fs.StringVar(&c.Database, "database", "", "sqlite:PATH or postgres://... (STORELINK_DATABASE_URL; default sqlite:<data>/storelink.db)")
	key := secretKeyFlag(fs, c, "the database's current key, 64 hex digits (STORELINK_SECRET_KEY; default <data>/secret-key)")
	if name == "rotate" {
		fs.StringVar(&newKey, "new-key", "", "the new key, 64 hex digits (STORELINK_NEW_SECRET_KEY; default generated, and written where the current key was read from, or to <data>/secret-key.new)")
	}
	env := map[string]string{"data": "STORELINK_DATA", "database": "STORELINK_DATABASE_URL", "secret-key": "STORELINK_SECRET_KEY"}
	if name == "rotate" {
		env["new-key"] = "STORELINK_NEW_SECRET_KEY"
	}
	for flagName, variable := range env {
		if v := getenv(variable); v != "" {
			if err := fs.Set(flagName, v); err != nil {
				return nil, "", usageError{fmt.Errorf("%s: %v", variable, err)}
			}
		}
	}
	key.source = "--secret-key"
	if err := fs.Parse(args); err != nil {
		return nil, "", usageError{err}
	}
	if fs.NArg() > 0 {
		return nil, "", usageError{fmt.Errorf("unexpected arguments: %v", fs.Args())}
	}
	if c.Database == "" {
		c.Database = "sqlite:" + filepath.Join(c.Data, "storelink.db")
	}
	return c, newKey, nil
}

// checkKey says whether current is the database's key, without recording
// anything.
func checkKey(ctx context.Context, ks storelink.SecretKeyStore, current *storelink.Sealer, from string, c *config, stdout io.Writer) error {
	recorded, err := ks.SecretKeyCheck(ctx)
	if err != nil {
		return err
	}
	switch {
	case recorded == current.Check():
		fmt.Fprintf(stdout, "storelink: the secret key from %s (fingerprint %s) is the database's\n", from, current.Fingerprint())
		return nil
	case recorded != "":
		return keyMismatch(&storelink.SecretKeyMismatch{Key: current.Fingerprint(), Database: storelink.KeyFingerprint(recorded)}, from, c)
	}
	values, err := ks.SealedValues(ctx)
	if err != nil {
		return err
	}
	opened, live := 0, 0
	for _, v := range values {
		if v.Live {
			live++
			if _, err := current.Open(v.Value); err == nil {
				opened++
			}
		}
	}
	if live > 0 && opened == 0 {
		return keyMismatch(&storelink.SecretKeyMismatch{Key: current.Fingerprint(), Sealed: live}, from, c)
	}
	fmt.Fprintf(stdout, "storelink: the database has no key recorded yet; the secret key from %s (fingerprint %s) opens %d of its %d sealed secrets\n",
		from, current.Fingerprint(), opened, live)
	return nil
}

// rotateKey seals every secret with a new key. A generated key, or a new
// key replacing one read from the data folder's file, is written to a file
// before the database changes, so that it cannot be lost: the database
// never holds secrets under a key that is nowhere. In order: the new key is
// staged in <data>/secret-key.new (file and folder synced), then the
// database commits to it, then it takes the old key's place (renamed, the
// folder synced). It cannot take that place before the commit: until then
// the old key is the database's, and serve must find it.
func rotateKey(ctx context.Context, ks storelink.SecretKeyStore, current *storelink.Sealer, from, newHex string, c *config, stdout io.Writer) error {
	newFrom := "--new-key"
	if newHex == "" {
		newHex, newFrom = randomHex(storelink.SealKeySize), "a generated key"
	}
	next, err := parseSecretKey(newHex, newFrom)
	if err != nil {
		return err
	}
	if next.Check() == current.Check() {
		return usageError{errors.New("the new key is the current one")}
	}
	fromFile := c.SecretKey == ""
	staged := ""
	if fromFile || newFrom != "--new-key" {
		staged = secretKeyPath(c) + ".new"
		// Durable before the commit below (writeSecretFile syncs).
		if err := writeSecretFile(c.Data, staged, newHex); err != nil {
			if errors.Is(err, os.ErrExist) {
				return fmt.Errorf("%s exists: a rotation may have stopped half way; see which key the database has with "+
					"`storelink secret-key check --secret-key …` (with each key), then remove the file", staged)
			}
			return fmt.Errorf("write the new key: %w", err)
		}
	}
	n, err := storelink.RotateSecretKey(ctx, ks, current, next) // the commit
	if err != nil {
		if staged != "" {
			os.Remove(staged)
		}
		var e *storelink.Error
		if errors.As(err, &e) {
			return errors.New(e.Message)
		}
		return keyMismatch(err, from, c)
	}
	where := "nowhere: start every serve with it (--secret-key or STORELINK_SECRET_KEY)"
	switch {
	case fromFile:
		path := secretKeyPath(c)
		old, err := installKey(path, staged, current, next)
		if err != nil {
			return err
		}
		where = fmt.Sprintf("%s (the old key is kept in %s for backups made before now)", path, old)
	case staged != "":
		where = staged + ": start every serve with it (--secret-key or STORELINK_SECRET_KEY), then remove the file"
	}
	fmt.Fprintf(stdout, "storelink: %d secrets sealed again with the new secret key (fingerprint %s, was %s); the key is in %s\n",
		n, next.Fingerprint(), current.Fingerprint(), where)
	return nil
}
