package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"storelink/internal/dbtest"
)

var clientCardRE = regexp.MustCompile(`data-client="([^"]+)" data-problems="(\d)"`)

// TestOverviewThousandClients: with 1,000 clients the overview pages them,
// 50 a page, the three with problems first (failed deliveries, then a
// rejected upload, then a capacity used up), and finds one by search. Its
// time is logged, not asserted: it reads every client's figures in a few
// statements, not client by client.
func TestOverviewThousandClients(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	s := f.seedData() // Acme DE: failed deliveries; Beta Shoes AT: nothing
	ctx := context.Background()
	// 998 more partners with a client each, written in two statements.
	for _, q := range []string{
		`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 997)
		 INSERT INTO partners (id, name, created_at) SELECT printf('p-%04d', i), printf('Partner %04d', i), 0 FROM n`,
		`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 997)
		 INSERT INTO clients (id, partner_id, country_code, currency, created_at) SELECT printf('c-%04d', i), printf('p-%04d', i), 'DE', 'EUR', 0 FROM n`,
	} {
		must(t, dbtest.OnSQLite(f.db).Exec(ctx, q))
	}
	ids := make([]string, 998)
	for i := range ids {
		ids[i] = fmt.Sprintf("c-%04d", i)
	}
	// Partner 0500: a rejected upload (a file without a header). Partner
	// 0900: 1 MiB left of its 20 MiB bucket, as after a 19 MiB upload.
	rejected, full := ids[500], ids[900]
	f.accept(rejected, "no-header.csv", "\n")
	f.processAll()
	must(t, dbtest.OnSQLite(f.db).Exec(ctx, fmt.Sprintf(`INSERT INTO capacity (client_id, tokens, updated_at) VALUES ('%s', %d, %d)`,
		full, 1<<20, time.Now().UnixMilli())))

	b := f.browser()
	b.login()
	var body string
	for i := range 3 {
		start := time.Now()
		body = b.page("/dashboard/")
		t.Logf("overview of 1,000 clients, view %d: %s", i+1, time.Since(start).Round(time.Microsecond))
	}
	cards := clientCardRE.FindAllStringSubmatch(body, -1)
	if len(cards) != 50 {
		t.Fatalf("the first page shows %d clients, want 50", len(cards))
	}
	for i, want := range []string{s.ClientID, rejected, full} {
		if cards[i][1] != want || cards[i][2] != "1" {
			t.Errorf("card %d = %v, want client %s with one problem", i, cards[i][1:], want)
		}
	}
	if cards[3][2] != "0" {
		t.Errorf("the fourth card has problems: %v", cards[3])
	}
	wantContains(t, "the overview", body, `<b>1000</b><span>clients`, `<b id="with-problems">3</b>`, "Page 1 of 20",
		"2 failed deliveries", "1 rejected upload in 24h", "capacity 95% used", `rel="next"`)

	only := b.page("/dashboard/?only=problems")
	if n := len(clientCardRE.FindAllString(only, -1)); n != 3 {
		t.Errorf("only clients with problems: %d shown, want 3", n)
	}
	last := b.page("/dashboard/?sort=name&page=20")
	if n := len(clientCardRE.FindAllString(last, -1)); n != 50 || !strings.Contains(last, "Page 20 of 20") || strings.Contains(last, `rel="next"`) {
		t.Errorf("page 20 of 20 shows %d clients", n)
	}
	beyond := b.page("/dashboard/?sort=name&page=99")
	if !strings.Contains(beyond, "Page 20 of 20") {
		t.Error("a page beyond the last does not show the last")
	}
	found := b.page("/dashboard/?q=partner+0123")
	if cs := clientCardRE.FindAllStringSubmatch(found, -1); len(cs) != 1 || cs[0][1] != ids[123] || !strings.Contains(found, "Partner 0123 · DE") {
		t.Errorf("search for partner 0123 found %v", cs)
	}
	byName := clientCardRE.FindAllStringSubmatch(b.page("/dashboard/?sort=name"), -1)
	if byName[0][1] != s.ClientID || byName[1][1] != s.OtherClientID || byName[2][1] != ids[0] {
		t.Errorf("by name the first are %v, want Acme, Beta, Partner 0000", byName[:3])
	}
	for _, bad := range []string{"/dashboard/?sort=size", "/dashboard/?page=0", "/dashboard/?page=x"} {
		if resp, _ := b.get(bad); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET %s = %d, want 400", bad, resp.StatusCode)
		}
	}
}
