package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"storelink/internal/dbtest"
	"storelink/worker"
)

// pgSchemaURL makes an empty schema in the test database and returns a URL
// that selects it, with a password (ignored under trust auth) that must
// never be printed. It skips without STORELINK_TEST_DATABASE_URL.
func pgSchemaURL(t testing.TB) (string, string) {
	t.Helper()
	u, err := url.Parse(dbtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	const password = "not-to-be-printed"
	if u.User != nil {
		u.User = url.UserPassword(u.User.Username(), password)
	}
	return u.String(), password
}

// TestMigratePostgres: `storelink migrate --database postgres://…` applies
// the schema and says so, is a no-op the second time, and never prints the
// password.
func TestMigratePostgres(t *testing.T) {
	dbURL, password := pgSchemaURL(t)
	out := wantMigrateSays(t, dbURL)
	if strings.Contains(out, password) {
		t.Fatalf("migrate printed the password:\n%s", out)
	}
}

// TestServePostgresScaleOut: two serve processes on one PostgreSQL
// database share the work. 20 uploads of one client, sent alternately to
// the two in quick succession, each setting a higher quantity for the same
// article, are all accepted and applied, each exactly once and one after the
// other in acceptance order, whichever process applies them: the last one's
// quantity is in force.
func TestServePostgresScaleOut(t *testing.T) {
	t.Parallel()
	dbURL, password := pgSchemaURL(t)
	a, b := startPair(t, dbURL)
	const n = 20
	var ids []string
	for i := range n {
		p := []*proc{a, b}[i%2]
		body := fmt.Sprintf("store;ean;article_number;quantity;price\nS1;4006381333931;SKU-1;%d;19.99\n", i+1)
		code, u := p.upload(t, "f.csv", []byte(body))
		if code != 200 {
			t.Fatalf("upload %d to process %d = %d %v", i, i%2, code, u)
		}
		ids = append(ids, u["upload_id"].(string))
	}
	for i, id := range ids {
		p := []*proc{b, a}[i%2] // read back from the other process
		if u := p.waitUpload(t, id, 10*time.Second); u["status"] != "applied" || u["rows_applied"] != float64(1) {
			t.Fatalf("upload %d %s = %v, want applied with one row", i, id, u)
		}
	}
	rows := allStock(t, a, "&store=S1&ean=4006381333931")
	if len(rows) != 1 || rows[0].Quantity != n || rows[0].UploadID != ids[n-1] {
		t.Fatalf("stock in force = %+v, want quantity %d from the last upload %s", rows, n, ids[n-1])
	}

	// One after the other, in acceptance order, each claimed once. Uploads
	// claimed together (a batch: one started_at) are applied in acceptance
	// order in one transaction, so their finished_at never go back. Across
	// claims, a claim's started_at is read from the clock just before its
	// statement runs, and the statement only sees the upload before it once
	// that one's apply has committed, a moment after its finished_at: so
	// started_at may precede the previous finished_at by that moment, never
	// by more.
	const slack = 50 * time.Millisecond
	list := allUploads(t, b) // newest first
	if len(list) != n {
		t.Fatalf("%d uploads listed, want %d", len(list), n)
	}
	slices.Reverse(list)
	for i, u := range list {
		if u.ID != ids[i] {
			t.Fatalf("upload %d listed as %s, accepted as %s", i, u.ID, ids[i])
		}
		if i == 0 {
			continue
		}
		prev := list[i-1]
		switch {
		case u.StartedAt.Equal(*prev.StartedAt):
			if u.FinishedAt.Before(*prev.FinishedAt) {
				t.Errorf("upload %d finished at %s, before upload %d of its batch at %s", i, u.FinishedAt, i-1, prev.FinishedAt)
			}
		case u.StartedAt.Before(prev.FinishedAt.Add(-slack)):
			t.Errorf("upload %d started at %s, before upload %d finished at %s", i, u.StartedAt, i-1, prev.FinishedAt)
		}
	}
	var claims, maxClaims int
	if err := pgConn(t, dbURL).QueryRow(context.Background(), `SELECT count(*), coalesce(max(attempts), 0) FROM uploads`).
		Scan(&claims, &maxClaims); err != nil || claims != n || maxClaims != 1 {
		t.Errorf("uploads table: %d uploads, claimed at most %d times (%v); want %d, each claimed once", claims, maxClaims, err, n)
	}
	counts := appliedBy(t, n, a, b)
	na, nb := counts[0], counts[1]
	if na+nb != n || metric(t, a, `storelink_uploads_processed_total{status="rejected"}`)+
		metric(t, b, `storelink_uploads_processed_total{status="rejected"}`) != 0 {
		t.Errorf("processes applied %v and %v uploads, want %d in all, none rejected", na, nb, n)
	}
	t.Logf("%d uploads: %v applied by one process, %v by the other", n, na, nb)
	for _, p := range []*proc{a, b} {
		if err := p.Stop(); err != nil {
			t.Fatalf("stop: %v\n%s", err, p.stderr)
		}
		if strings.Contains(p.stdout.String()+p.stderr.String(), password) {
			t.Fatal("serve printed the database password")
		}
	}
}

// The operator token and the key of webhook secrets that every process of
// one installation is given: a process must be able to open the secrets
// another one sealed.
const (
	pgTestToken = "sla_multi_process_test_token_0123456789"
	pgTestKey   = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
)

// pgArgs are the serve flags of one installation on dbURL, then extra.
func pgArgs(dbURL string, extra ...string) []string {
	return append([]string{"--database", dbURL, "--admin-token", pgTestToken, "--secret-key", pgTestKey}, extra...)
}

// startPair starts two serve processes on dbURL, each with a data folder of
// its own; the first with --demo, whose credentials both then carry.
func startPair(t testing.TB, dbURL string, extra ...string) (a, b *proc) {
	t.Helper()
	a = startServe(t, t.TempDir(), pgArgs(dbURL, append([]string{"--demo"}, extra...)...)...)
	if a.ClientID == "" || a.APIKey == "" || a.WebhookSecret == "" {
		t.Fatalf("serve --demo printed no client, API key or webhook secret:\n%s", a.stdout)
	}
	b = startServe(t, t.TempDir(), pgArgs(dbURL, extra...)...)
	b.ClientID, b.APIKey, b.PartnerID, b.WebhookSecret = a.ClientID, a.APIKey, a.PartnerID, a.WebhookSecret
	a.AdminToken, b.AdminToken = pgTestToken, pgTestToken
	return a, b
}

// pgConn connects to the schema of dbURL (its search_path parameter) for
// looking at what the processes wrote.
func pgConn(t testing.TB, dbURL string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("connect to the test schema: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// metric reads one series of a process's /metrics, e.g.
// `storelink_uploads_processed_total{status="applied"}`; 0 when absent.
func metric(tb testing.TB, p *proc, series string) float64 {
	tb.Helper()
	resp, err := p.getMetrics(nil)
	if err != nil {
		tb.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET /metrics = %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				tb.Fatalf("metric %s: %q", series, v)
			}
			return f
		}
	}
	return 0
}

// appliedBy reads how many uploads each process counts as applied, waiting
// (up to 5 s) for the counts to add up to want: a process counts an upload
// just after its apply commits, so a status read can see it first.
func appliedBy(tb testing.TB, want float64, procs ...*proc) []float64 {
	tb.Helper()
	const series = `storelink_uploads_processed_total{status="applied"}`
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var sum float64
		n := make([]float64, len(procs))
		for i, p := range procs {
			n[i] = metric(tb, p, series)
			sum += n[i]
		}
		if sum == want || time.Now().After(deadline) {
			return n
		}
	}
}

// owns tells whether a lease owner (host/pid/random) is process p's.
func owns(p *proc, owner string) bool {
	return strings.Contains(owner, "/"+strconv.Itoa(p.PID())+"/")
}

// TestPostgresStartTogether starts three serve processes at the same moment
// on an empty schema: the migrations are applied once (each version once in
// goose's table) and all three serve.
func TestPostgresStartTogether(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir("../../postgres/migrations")
	if err != nil {
		t.Fatal(err)
	}
	var versions []int64
	for _, e := range entries {
		if v, _, ok := strings.Cut(e.Name(), "_"); ok && strings.HasSuffix(e.Name(), ".sql") {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("migration %s: %v", e.Name(), err)
			}
			versions = append(versions, n)
		}
	}
	for round := range 2 {
		dbURL, _ := pgSchemaURL(t)
		procs := startTogether(t, 3, pgArgs(dbURL)...)
		for i, p := range procs {
			if code, body := p.get(t, "/readyz"); code != http.StatusOK {
				t.Errorf("round %d: process %d answers /readyz with %d %v", round, i, code, body)
			}
		}
		rows, err := pgConn(t, dbURL).Query(context.Background(),
			`SELECT version_id, count(*) FROM goose_db_version WHERE version_id > 0 GROUP BY version_id ORDER BY version_id`)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for rows.Next() {
			var v, n int64
			if err := rows.Scan(&v, &n); err != nil {
				t.Fatal(err)
			}
			if n != 1 {
				t.Errorf("round %d: migration %d recorded %d times", round, v, n)
			}
			got = append(got, v)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, versions) {
			t.Errorf("round %d: migrations recorded %v, want %v", round, got, versions)
		}
	}
}

// startTogether starts n serve processes at once, each with a data folder of
// its own, and waits until every one listens. Unlike n calls of startServe,
// no process gets a head start (of migrating, say) on the others.
func startTogether(t *testing.T, n int, args ...string) []*proc {
	t.Helper()
	bin := storelinkBinary(t)
	procs := make([]*proc, n)
	lines := make([]chan string, n)
	for i := range n {
		data := t.TempDir()
		cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--data", data}, args...)...)
		cmd.Env = append(os.Environ(), "STORELINK_ADMIN_TOKEN=")
		p := &proc{cmd: cmd, Data: data, stdout: &syncBuffer{}, stderr: &syncBuffer{}}
		cmd.Stderr = p.stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		procs[i], lines[i] = p, make(chan string)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines[i] <- sc.Text()
			}
			close(lines[i])
		}()
	}
	for _, p := range procs {
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Kill)
	}
	deadline := time.After(30 * time.Second)
	for i, p := range procs {
		for p.URL == "" {
			select {
			case line, ok := <-lines[i]:
				if !ok {
					t.Fatalf("process %d of %d exited before listening:\n%s\n%s", i, n, p.stdout, p.stderr)
				}
				p.stdout.WriteString(line + "\n")
				p.parseLine(line)
			case <-deadline:
				t.Fatalf("process %d of %d did not listen within 30s:\n%s\n%s", i, n, p.stdout, p.stderr)
			}
		}
		go func() {
			for range lines[i] { // keep draining so the process never blocks on stdout
			}
		}()
	}
	return procs
}

// TestPostgresKillsWhileProcessingAreNotFailures kills (SIGKILL) the one
// process on a database while it applies an upload, more times than
// worker.MaxFailures, starting it again each time: the upload is claimed
// again once each lease (--upload-lease) and backoff is over, and applied
// once, not rejected; the database counts the kills as interruptions, none
// as a failure of the file.
func TestPostgresKillsWhileProcessingAreNotFailures(t *testing.T) {
	t.Parallel()
	var dbURL string
	kills := worker.MaxFailures + 1
	stopsWhileProcessing(t, bigFeed(170_000, 0, 8), kills, func() []string {
		dbURL, _ = pgSchemaURL(t)
		return pgArgs(dbURL, "--upload-lease", "2s")
	}, func(t *testing.T, p *proc, _ int) { p.Kill() })
	var attempts, failures int
	if err := pgConn(t, dbURL).QueryRow(context.Background(), `SELECT attempts, failures FROM uploads`).Scan(&attempts, &failures); err != nil {
		t.Fatal(err)
	}
	if attempts != kills+1 || failures != 0 {
		t.Errorf("the upload was claimed %d times with %d failures, want %d claims (%d of them killed) and no failure",
			attempts, failures, kills+1, kills)
	}
}
