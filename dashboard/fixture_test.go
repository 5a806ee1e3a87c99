package dashboard_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"storelink"
	"storelink/dashboard"
	"storelink/httpapi"
	"storelink/internal/dbtest"
	"storelink/postgres"
	"storelink/service"
	"storelink/sqlite"
	"storelink/webhook"
	"storelink/worker"
)

// fixture is a real server: the API with the dashboard mounted, on a temp
// SQLite database (or a fresh PostgreSQL schema), as serve wires it.
type fixture struct {
	t *testing.T
	// db and dbPath are the SQLite database's; db is nil on PostgreSQL.
	db     *sqlite.DB
	dbPath string
	// services are the services of package service over db's driver,
	// with its sealer, as serve has them.
	services *service.Services
	URL      string
	// Token is the admin token.
	Token string
	proc  *worker.Processor
	// downloads are the places of the file downloads, shared by the API
	// and the dashboard as serve shares them.
	downloads *httpapi.Downloads
	// testSends are the places of the test sends, shared likewise.
	testSends *httpapi.TestSends
	// offset moves the dashboard's clock, to expire sessions.
	offset atomic.Int64
	woken  atomic.Int32
	// secrets are every secret made for the fixture: none may appear in a
	// page.
	mu      sync.Mutex
	secrets []string
	// logs is what the API and the dashboard logged: no secret may be in
	// it either.
	logs lockedBuffer
}

// lockedBuffer is a buffer that the server's goroutines write to at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var capacity = storelink.CapacityPolicy{Base: 20 << 20, PerStore: 2 << 20, Window: time.Hour}

type fixtureOptions struct {
	// deliver runs a deliverer with a short retry schedule.
	deliver bool
	// processNow runs the upload processor from the start; otherwise the
	// test calls startProcessor or processAll.
	processNow bool
	// webhooks, when set, wraps the webhook service the dashboard gets.
	webhooks func(storelink.WebhookService) storelink.WebhookService
	// trustedProxies, when set, are the proxies (--trusted-proxies) whose
	// X-Forwarded-For the login limit and the API believe.
	trustedProxies string
	// loginLimit, when set, wraps the login limit the dashboard gets (the
	// API gets it bare).
	loginLimit func(dashboard.LoginLimit) dashboard.LoginLimit
	// databaseTimeout, when set, is the API's (Deps.DatabaseTimeout).
	databaseTimeout time.Duration
	// postgres runs the fixture on a fresh schema of the PostgreSQL
	// database of STORELINK_TEST_DATABASE_URL (skipped without it) rather
	// than on a temp SQLite file.
	postgres bool
	// denyPrivate refuses webhook URLs on loopback and private addresses,
	// as serve does unless told otherwise.
	denyPrivate bool
	// maxFileSize, when set, is the largest stock file the API and the
	// portal take (10 MiB otherwise).
	maxFileSize int64
	// writesPerMinute, when set, is the rate of each client's writes that
	// the API and the portal share (httpapi.DefaultWritesPerMinute
	// otherwise).
	writesPerMinute int
}

// eachDatabase runs fn as a subtest on a fixture on SQLite and on one on
// PostgreSQL, the latter skipped without STORELINK_TEST_DATABASE_URL.
func eachDatabase(t *testing.T, o fixtureOptions, fn func(t *testing.T, f *fixture)) {
	for _, pg := range []bool{false, true} {
		name := map[bool]string{false: "sqlite", true: "postgres"}[pg]
		t.Run(name, func(t *testing.T) {
			o.postgres = pg
			fn(t, newFixture(t, o))
		})
	}
}

func newFixture(t *testing.T, o fixtureOptions) *fixture {
	t.Helper()
	var (
		db      *sqlite.DB
		dbPath  string
		drivers service.Drivers
		ping    func(context.Context) error
		fault   = sqlite.Fault
		err     error
	)
	if o.postgres {
		pdb, err := postgres.Open(context.Background(), dbtest.Schema(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pdb.Close() })
		drivers, ping, fault = postgres.NewDrivers(pdb), pdb.Ping, postgres.Fault
	} else {
		dbPath = filepath.Join(t.TempDir(), "storelink.db")
		if db, err = sqlite.Open(context.Background(), dbPath); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		drivers, ping = sqlite.NewDrivers(db), db.Ping
	}
	maxFileSize := o.maxFileSize
	if maxFileSize == 0 {
		maxFileSize = 10 << 20
	}
	key := make([]byte, storelink.SealKeySize)
	_, _ = rand.Read(key)
	sealer, err := storelink.NewSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	// As serve wires it: upload events name the API's path of the upload.
	svc := service.New(drivers, service.WithSealer(sealer), service.WithUploadStatusURL(httpapi.UploadStatusPath))
	f := &fixture{t: t, db: db, dbPath: dbPath, services: svc, Token: "sla_" + hex.EncodeToString(key)}
	f.keep(f.Token)
	reg := prometheus.NewRegistry()
	f.proc = worker.NewProcessor(f.services.Uploads, nil, "test", reg)
	f.proc.Interval = 50 * time.Millisecond
	wake := func() {}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	// The deliverer sends the test events, and runs when deliver is set.
	client := webhook.NewClient(2*time.Second, true)
	t.Cleanup(client.CloseIdleConnections)
	deliverer := worker.NewDeliverer(f.services.Webhooks, client, storelink.RetryPolicy{Schedule: []time.Duration{30 * time.Millisecond, 30 * time.Millisecond}},
		2*time.Second, nil, "test", reg)
	if o.deliver {
		deliverer.Interval = 20 * time.Millisecond
		wake = deliverer.Wake
		wg.Go(func() { _ = deliverer.Run(ctx) })
	}
	limit := httpapi.NewAuthLimiter(httpapi.DefaultAuthFailuresPerMinute)
	proxies, err := httpapi.ParseTrustedProxies(o.trustedProxies)
	if err != nil {
		t.Fatal(err)
	}
	f.downloads = httpapi.NewDownloads(0, 0, 0)
	f.testSends = httpapi.NewTestSends(2 * time.Second)
	// One rate of writes per client for the API and the portal, as serve
	// wires it.
	writes := httpapi.NewWriteLimit(cmp.Or(o.writesPerMinute, httpapi.DefaultWritesPerMinute))
	var loginLimit dashboard.LoginLimit = limit
	if o.loginLimit != nil {
		loginLimit = o.loginLimit(limit)
	}
	var webhooks storelink.WebhookService = f.services.Webhooks
	if o.webhooks != nil {
		webhooks = o.webhooks(f.services.Webhooks)
	}
	logger := slog.New(slog.NewTextHandler(&f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var api *httpapi.Server
	receive := func(r *http.Request, c *storelink.Client, name string, file io.Reader) (*storelink.Upload, *http.Request, error) {
		return api.ReceiveUpload(r, c, name, file)
	}
	dash := dashboard.New(dashboard.Deps{
		Admin: f.services.Partners, Uploads: f.services.Uploads, Stock: f.services.Uploads, Orders: f.services.Orders, Webhooks: webhooks, Sessions: f.services.Partners, LoginLimit: loginLimit,
		Auth: f.services.Partners, Tester: deliverer, OutsideDB: httpapi.OutsideDB, EndpointDeleted: deliverer.DropEndpoint, Download: f.downloads.Take,
		TestSend: f.testSends.Take, PartnerWrite: writes.Take, AdminToken: f.Token, Capacity: capacity, Fault: fault, ClientAddr: proxies.ClientAddr,
		WebhookAllowPrivate: !o.denyPrivate, ReceiveUpload: receive, Logger: logger,
		Wake: func() { f.woken.Add(1); wake() },
		Now:  func() time.Time { return time.Now().Add(time.Duration(f.offset.Load())) },
	})
	api = httpapi.NewServer(httpapi.Deps{
		Admin: f.services.Partners, Auth: f.services.Partners, Uploads: f.services.Uploads, Stock: f.services.Uploads, Orders: f.services.Orders, Events: f.services.Orders, Webhooks: f.services.Webhooks, Ping: ping,
		AdminToken: f.Token, AuthLimit: limit, TrustedProxies: proxies, Downloads: f.downloads, TestSends: f.testSends, Writes: writes, Capacity: capacity, MaxFileSize: maxFileSize, WebhookAllowPrivate: !o.denyPrivate, Fault: fault,
		Accepted: func() { f.proc.Wake(); wake() }, Registry: reg, Dashboard: dash, DatabaseTimeout: o.databaseTimeout, Logger: logger,
	})
	srv := httptest.NewServer(api)
	f.URL = srv.URL
	t.Cleanup(func() { srv.Close(); cancel(); wg.Wait() })
	if o.processNow {
		f.startProcessor()
	}
	return f
}

// startProcessor runs the upload processor until the test ends.
func (f *fixture) startProcessor() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = f.proc.Run(ctx); close(done) }()
	f.t.Cleanup(func() { cancel(); <-done })
}

// processAll applies every waiting upload now.
func (f *fixture) processAll() {
	f.t.Helper()
	for {
		more, err := f.proc.RunOnce(context.Background())
		if err != nil {
			f.t.Fatal(err)
		}
		if !more {
			return
		}
	}
}

func (f *fixture) keep(secret string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.secrets = append(f.secrets, secret)
}

// checkNoSecretLogged fails when the server logged any secret of the
// fixture.
func (f *fixture) checkNoSecretLogged() {
	f.t.Helper()
	f.checkNoSecret("the log", f.logs.String())
}

// checkNoSecret fails when a page shows any secret of the fixture.
func (f *fixture) checkNoSecret(where, body string) {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.secrets {
		if strings.Contains(body, s) {
			f.t.Errorf("%s shows the secret %.12s…", where, s)
		}
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// seed is what seedData made.
type seed struct {
	ClientID, OtherClientID     string
	APIKey, OtherAPIKey         string
	SecondKeyID, SecondKey      string
	Good, Bad, Waiting          *storelink.Upload
	OrderID, OrderNumber        string
	FailedDelivery, EndpointID  string
	OffEndpointID, PasswordHost string
}

// ean13 returns a valid EAN-13 for twelve digits.
func ean13(d12 string) string {
	sum := 0
	for i, c := range d12 {
		n := int(c - '0')
		if i%2 == 1 {
			n *= 3
		}
		sum += n
	}
	return d12 + fmt.Sprint((10-sum%10)%10)
}

var (
	ean1 = ean13("400638133393")
	ean2 = ean13("400638133394")
	ean3 = ean13("400638133395")
)

// seedData fills the database through the services: two partners, stores,
// endpoints (one with an x-api-key, one with a password in its URL, one
// disabled), an applied upload, a rejected-rows upload, one still waiting,
// an order and a failed delivery.
func (f *fixture) seedData() seed {
	t, ctx := f.t, context.Background()
	var s seed
	p, err := f.services.Partners.CreatePartner(ctx, "Acme Retail")
	must(t, err)
	c, err := f.services.Partners.CreateClient(ctx, p.ID, "DE", "EUR")
	must(t, err)
	f.keep(c.APIKey)
	s.ClientID, s.APIKey = c.ID, c.APIKey
	k2, err := f.services.Partners.CreateAPIKey(ctx, c.ID)
	must(t, err)
	f.keep(k2.APIKey)
	s.SecondKeyID, s.SecondKey = k2.KeyID, k2.APIKey
	for _, id := range []string{"S1", "S2"} {
		_, _, err := f.services.Partners.PutStore(ctx, c.ID, id, "Store "+id)
		must(t, err)
	}
	p2, err := f.services.Partners.CreatePartner(ctx, "Beta Shoes")
	must(t, err)
	c2, err := f.services.Partners.CreateClient(ctx, p2.ID, "AT", "EUR")
	must(t, err)
	f.keep(c2.APIKey)
	s.OtherClientID, s.OtherAPIKey = c2.ID, c2.APIKey

	for i, n := range []storelink.NewEndpoint{
		{URL: "http://127.0.0.1:1/hooks/${eventId}", APIKey: "partner-side-key-0123456789"},
		{URL: "https://ops:pa55w0rd-in-url@hooks.example.com/storelink"},
		{URL: "https://hooks.example.com/off"},
	} {
		secret := webhook.NewSecret()
		f.keep(secret)
		e, err := f.services.Webhooks.CreateEndpoint(ctx, c.ID, n, secret)
		must(t, err)
		switch i {
		case 0:
			s.EndpointID = e.ID
		case 2:
			off := false
			_, err := f.services.Webhooks.UpdateEndpoint(ctx, "", e.ID, storelink.EndpointPatch{Enabled: &off})
			must(t, err)
			s.OffEndpointID = e.ID
		}
	}
	f.keep("partner-side-key-0123456789")
	f.keep("pa55w0rd-in-url")

	s.Good = f.accept(c.ID, "stock-full.csv", "store;ean;article_number;quantity;price;retail_price;product_name\n"+
		"S1;"+ean1+";SKU-1;5;19.99;29.99;Trail shoe\n"+
		"S1;"+ean2+";SKU-2;0;5.00;;Socks\n"+
		"S2;"+ean1+";SKU-1;7;19.99;29.99;Trail shoe\n")
	f.processAll()
	s.Bad = f.accept(c.ID, "stock-bad.csv", "store;ean;article_number;quantity;price;colour\n"+
		"S1;"+ean3+";SKU-3;4;9.99;red\n"+
		"S9;"+ean3+";SKU-3;4;9.99;red\n"+
		"S1;4006381333932;SKU-4;4;9.99;red\n"+
		"S1;"+ean1+";SKU-1;<b>-3</b>;19.99;red\n"+
		"S2;"+ean2+";SKU-2;1;;blue\n")
	f.processAll()
	s.Waiting = f.accept(c.ID, "stock-later.csv", "store;ean;article_number;quantity;price\nS2;"+ean2+";SKU-2;3;5.00\n")

	s.OrderNumber = "MP-1001"
	o, err := f.services.Orders.CreateOrder(ctx, storelink.NewOrder{OrderNumber: s.OrderNumber, ClientID: c.ID, StoreID: "S1",
		Items: []storelink.NewItem{{EAN: ean1, MarketplaceArticleNumber: "MA-1"}, {EAN: ean1, MarketplaceArticleNumber: "MA-1"}},
		CustomerBillingAddress: &storelink.Address{FirstName: "Erika", LastName: "Mustermann", AddressLine1: "Hauptstr. 1",
			ZipCode: "10115", City: "Berlin", CountryCode: "DE"}})
	must(t, err)
	s.OrderID = o.ID
	s.FailedDelivery = f.failDeliveries()
	return s
}

// accept takes an upload as the API would.
func (f *fixture) accept(clientID, name, body string) *storelink.Upload {
	f.t.Helper()
	sum := sha256.Sum256([]byte(body))
	u, _, err := f.services.Uploads.Accept(context.Background(), storelink.NewUpload{
		ClientID: clientID, FileName: name, Body: storelink.ChunksOf([]byte(body)), SHA256: hex.EncodeToString(sum[:]),
	}, capacity)
	must(f.t, err)
	return u
}

// failDeliveries claims every due delivery and records it as failed for
// good, as the deliverer does when the schedule is spent; it returns the
// id of one of them.
func (f *fixture) failDeliveries() string {
	f.t.Helper()
	ctx := context.Background()
	jobs, err := f.services.Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: "test", Lease: time.Minute, Limit: 100, Caps: storelink.EndpointCap(100)})
	must(f.t, err)
	if len(jobs) == 0 {
		f.t.Fatal("no delivery to fail")
	}
	var results []storelink.AttemptResult
	for i := range jobs {
		results = append(results, storelink.AttemptResult{Job: &jobs[i], Outcome: storelink.OutcomeFailed,
			Attempt: storelink.Attempt{Number: jobs[i].Attempt, At: time.Now(), DurationMS: 42, StatusCode: 503, Response: "upstream unavailable"}})
	}
	must(f.t, f.services.Webhooks.RecordAttempts(ctx, results))
	return jobs[0].DeliveryID
}

// browser is an HTTP client with a cookie jar that does not follow
// redirects, so that the tests see each answer.
type browser struct {
	f *fixture
	c *http.Client
}

func (f *fixture) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{f: f, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}
