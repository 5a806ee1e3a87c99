package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"storelink"
	"storelink/postgres"
	"storelink/service"
	"storelink/sqlite"
	"storelink/webhook"
)

// openDB opens the configured database, applies the migrations, and
// returns the services over it, a *service.Services whichever the
// database, and what the migrations did. They seal no secret: useSecretKey makes them again with the
// sealer once the key is checked against the database.
func openDB(ctx context.Context, c *config) (*service.Services, storelink.Migrated, error) {
	switch {
	case strings.HasPrefix(c.Database, "sqlite:"):
		path := strings.TrimPrefix(c.Database, "sqlite:")
		if path == "" {
			return nil, storelink.Migrated{}, usageError{errors.New("--database sqlite: needs a path, e.g. sqlite:./storelink-data/storelink.db")}
		}
		db, err := sqlite.Open(ctx, path)
		if err != nil {
			return nil, storelink.Migrated{}, err
		}
		return service.New(sqlite.NewDrivers(db)), db.Migrated(), nil
	case strings.HasPrefix(c.Database, "postgres://"), strings.HasPrefix(c.Database, "postgresql://"):
		db, err := postgres.Open(ctx, c.Database)
		if err != nil {
			// The driver's errors may quote the URL; the password never.
			return nil, storelink.Migrated{}, errors.New(strings.ReplaceAll(err.Error(), c.Database, redactURL(c.Database)))
		}
		return service.New(postgres.NewDrivers(db)), db.Migrated(), nil
	}
	return nil, storelink.Migrated{}, usageError{fmt.Errorf("--database must be sqlite:PATH or postgres://..., got %q", redactURL(c.Database))}
}

// redactURL hides a password in a database URL before it is shown, in the
// user part (postgres://user:secret@host) or as a parameter (?password=).
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Opaque != "" || u.Host == "" {
		// Not a URL with a host (sqlite:PATH), or not parseable: hide
		// anything before an @ all the same.
		if i := strings.LastIndex(s, "@"); i > 0 {
			if j := strings.Index(s, "://"); j > 0 && j < i {
				return s[:j+3] + "…" + s[i:]
			}
		}
		return s
	}
	// pgx reads a password from the parameters too, and the client key's
	// from sslpassword.
	if q := u.Query(); q.Has("password") || q.Has("sslpassword") {
		for _, p := range []string{"password", "sslpassword"} {
			if q.Has(p) {
				q.Set(p, "xxxxx")
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

func migrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c, err := parseConfig("migrate", args, getenv, stderr)
	if err != nil {
		return err
	}
	db, migrated, err := openDB(ctx, c)
	if err != nil {
		return err
	}
	defer db.Close()
	fmt.Fprintf(stdout, "storelink: database %s: %s\n", redactURL(c.Database), migrated)
	return nil
}

// serve runs `storelink serve`: the server of the configuration in args
// and the environment, until ctx ends.
func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c, err := parseConfig("serve", args, getenv, stderr)
	if err != nil {
		return err
	}
	return newServer(c, getenv, stdout, stderr).Run(ctx)
}

// adminToken returns the configured token, or the one kept in the data
// folder, generating it on first use. Only its path is printed. A token
// in the file is held to the rule of --admin-token: a file someone wrote a
// weak token into, or that was left empty, stops serve (exit 2) saying so.
func adminToken(c *config, stdout io.Writer) (string, error) {
	if c.AdminToken != "" {
		return c.AdminToken, nil
	}
	path := filepath.Join(c.Data, "admin-token")
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		token := strings.TrimSpace(string(b))
		if token == "" {
			return "", usageError{fmt.Errorf("the admin token file %s is empty: delete it to have a token generated, "+
				"or write a token of at least %d characters with no white space into it (e.g. `openssl rand -hex 32`)", path, minAdminToken)}
		}
		if n, ok := adminTokenOK(token); !ok {
			return "", usageError{fmt.Errorf("the admin token in %s must be at least %d characters with no white space "+
				"(it has %d characters): delete the file to have one generated, or write such a token into it "+
				"(e.g. `openssl rand -hex 32`)", path, minAdminToken, n)}
		}
		fmt.Fprintf(stdout, "storelink: admin token in %s\n", path)
		return token, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("read the admin token: %w", err)
	}
	token := "sla_" + randomHex(32)
	if err := writeSecretFile(c.Data, path, token); err != nil {
		return "", fmt.Errorf("write admin token: %w", err)
	}
	fmt.Fprintf(stdout, "storelink: generated an admin token in %s\n", path)
	return token, nil
}

// writeSecretFile creates path in dir with mode 0600, never overwriting
// one, and syncs the file and then dir before it returns: a database may
// record the key next, and must never outlive a power cut that the file
// did not.
func writeSecretFile(dir, path, content string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(content + "\n"); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir makes the names created or renamed in dir durable: syncing a
// file makes its content durable, not its entry in the folder.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// demo fills an empty database with a partner, a client and three stores so
// that a new user can upload at once, and prints what they need.
func demo(ctx context.Context, db *service.Services, webhookURL string, stdout io.Writer) error {
	n, err := db.Partners.PartnerCount(ctx)
	if err != nil || n > 0 {
		if n > 0 {
			fmt.Fprintln(stdout, "storelink: --demo: the database already has partners; nothing created")
		}
		return err
	}
	p, err := db.Partners.CreatePartner(ctx, "Demo Partner")
	if err != nil {
		return err
	}
	cl, err := db.Partners.CreateClient(ctx, p.ID, "DE", "EUR")
	if err != nil {
		return err
	}
	for _, s := range []struct{ id, name string }{{"S1", "Demo Store Berlin"}, {"S2", "Demo Store Hamburg"}, {"S3", "Demo Store Munich"}} {
		if _, _, err := db.Partners.PutStore(ctx, cl.ID, s.id, s.name); err != nil {
			return err
		}
	}
	secret := webhook.NewSecret()
	if _, err := db.Webhooks.CreateEndpoint(ctx, cl.ID, storelink.NewEndpoint{URL: webhookURL}, secret); err != nil {
		return err
	}
	fmt.Fprintf(stdout, `storelink: demo partner created (shown once; keep them):
  partner_id:     %s
  client_id:      %s
  api_key:        %s
  stores:         S1, S2, S3
  webhook_url:    %s
  webhook_secret: %s
storelink: receive its order events with: storelink listen --addr %s --secret %s
storelink: a delivery that fails (listen not running yet) is tried again within 30 s for five minutes
`, p.ID, cl.ID, cl.APIKey, webhookURL, secret, listenAddrOf(webhookURL), secret)
	return nil
}

// listenAddrOf is the --addr of `storelink listen` that receives at
// webhookURL: its host and port (80 or 443 when it names none).
func listenAddrOf(webhookURL string) string {
	u, err := url.Parse(webhookURL)
	if err != nil {
		return defaultListenAddr
	}
	if u.Port() != "" {
		return u.Host
	}
	if u.Scheme == "https" {
		return net.JoinHostPort(u.Hostname(), "443")
	}
	return net.JoinHostPort(u.Hostname(), "80")
}
