package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"storelink"
	"storelink/sqlite"
)

const backupUsage = `Usage:
  storelink backup --to FILE [--data DIR] [--database sqlite:PATH]
      copy the embedded SQLite database to the new file FILE, consistently,
      while serve runs; keep the secret key beside it

On PostgreSQL, use pg_dump instead (storelink backup says what to keep beside it).
`

// backup runs `storelink backup --to FILE`: a consistent copy of the SQLite
// database, taken beside a running serve, and a reminder of the secret key
// the copy needs. The key itself is never printed.
func backup(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c := &config{Data: "./storelink-data"}
	var to string
	fs := flag.NewFlagSet("storelink backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), backupUsage); fs.PrintDefaults() }
	fs.StringVar(&to, "to", "", "the backup file to write; it must not exist")
	fs.StringVar(&c.Data, "data", c.Data, "data folder of serve (STORELINK_DATA)")
	fs.StringVar(&c.Database, "database", "", "sqlite:PATH (STORELINK_DATABASE_URL; default sqlite:<data>/storelink.db)")
	for flagName, variable := range map[string]string{"data": "STORELINK_DATA", "database": "STORELINK_DATABASE_URL"} {
		if v := getenv(variable); v != "" {
			if err := fs.Set(flagName, v); err != nil {
				return usageError{fmt.Errorf("%s: %v", variable, err)}
			}
		}
	}
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments: %v", fs.Args())}
	}
	if c.Database == "" {
		c.Database = "sqlite:" + filepath.Join(c.Data, "storelink.db")
	}
	switch {
	case strings.HasPrefix(c.Database, "postgres://"), strings.HasPrefix(c.Database, "postgresql://"):
		return usageError{fmt.Errorf("%s is a PostgreSQL database: back it up with PostgreSQL's own tools, "+
			"e.g. pg_dump --format=custom --file storelink.dump DATABASE_URL (or continuous archiving), and keep beside the dump "+
			"the secret key every serve runs with (--secret-key or STORELINK_SECRET_KEY: without it the webhook secrets and "+
			"endpoint API keys in the dump cannot be opened) and the admin token (--admin-token or STORELINK_ADMIN_TOKEN)",
			redactURL(c.Database))}
	case !strings.HasPrefix(c.Database, "sqlite:") || strings.TrimPrefix(c.Database, "sqlite:") == "":
		return usageError{fmt.Errorf("--database must be sqlite:PATH (or a postgres:// URL, to be told how to back it up), got %q", redactURL(c.Database))}
	case to == "":
		return usageError{errors.New("say where to write the backup with --to FILE")}
	}
	info, err := sqlite.Backup(ctx, strings.TrimPrefix(c.Database, "sqlite:"), to)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "storelink: backup of %s written to %s (%s, schema version %d, integrity checked)\n",
		strings.TrimPrefix(c.Database, "sqlite:"), to, formatSize(info.Bytes), info.Schema)
	fmt.Fprintln(stdout, backupKeyReminder(c, getenv, info.KeyCheck))
	return nil
}

// backupKeyReminder tells which secret key the backup needs and where the
// key serve would use is, by fingerprint: without the key, the webhook
// secrets and endpoint API keys of the backup cannot be opened.
func backupKeyReminder(c *config, getenv func(string) string, check string) string {
	if check == "" {
		return "storelink: the backup records no secret key yet; keep the data folder's secret-key file (if any) and admin-token beside it"
	}
	need := storelink.KeyFingerprint(check)
	where := ""
	if getenv("STORELINK_SECRET_KEY") != "" {
		c.SecretKey, c.secretKeyFrom = getenv("STORELINK_SECRET_KEY"), "STORELINK_SECRET_KEY"
	}
	if hexKey, from, err := findSecretKey(c); err == nil && hexKey != "" {
		if s, err := parseSecretKey(hexKey, from); err == nil && s.Check() == check {
			where = " it is the key from " + from + ";"
		} else {
			where = " the key from " + from + " is another;"
		}
	}
	return fmt.Sprintf("storelink: keep the secret key of fingerprint %s beside the backup:%s without it the webhook secrets "+
		"and endpoint API keys in the backup cannot be opened. Keep the admin token (%s or STORELINK_ADMIN_TOKEN) with it too.",
		need, where, filepath.Join(c.Data, "admin-token"))
}
