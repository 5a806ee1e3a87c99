package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"storelink"
	"storelink/httpapi"
	"storelink/service"
	"storelink/sqlite"
	"storelink/worker"
)

const adminToken = "sla_httpapi_test_admin_token_0123456789"

// api is a real server on a random port over a temp SQLite file, with the
// processor running, and a demo client with stores S1 and S2.
type api struct {
	t   *testing.T
	URL string
	db  *sqlite.DB
	// svc are the services of package service over db's driver.
	svc *service.Services
	// webhooks are svc with a sealer, the API's webhook store; nil without
	// apiOptions.webhooks.
	webhooks *service.Services
	ClientID string
	APIKey   string
	// PartnerID is the demo client's partner.
	PartnerID string
	reg       *prometheus.Registry
	// srv is the API's handler.
	srv *httpapi.Server
}

type apiOptions struct {
	capacity    storelink.CapacityPolicy
	maxFileSize int64
	// webhooks, when set, also wires endpoints, deliveries and a running
	// deliverer (harness_test.go); without it the API has no webhook calls'
	// store, as before.
	webhooks *webhookOptions
	// maxUploadsInFlight, bodyTimeout and firstByteTimeout, when set, are
	// the limits of body.go and inflight.go.
	maxUploadsInFlight int
	bodyTimeout        time.Duration
	firstByteTimeout   time.Duration
	// noProcessor leaves accepted uploads waiting: no processor runs.
	noProcessor bool
	// authLimit and trustedProxies, when set, are the API's.
	authLimit      *httpapi.AuthLimiter
	trustedProxies httpapi.TrustedProxies
	// The pools divided per partner and the validation rate (pool.go,
	// uploadmemory.go, validatelimit.go); the defaults when zero.
	maxUploadMemory      int64
	uploadMemoryShare    int64
	validationsPerMinute int
	// writes, when set, is the API's limit of partner writes
	// (ratelimit.go).
	writes    *httpapi.RateLimit
	downloads *httpapi.Downloads
	testSends *httpapi.TestSends
	// databaseTimeout, when set, is the API's (Deps.DatabaseTimeout).
	databaseTimeout time.Duration
	// uploads, when set, wraps the upload service the API gets.
	uploads func(storelink.UploadService) storelink.UploadService
	// publicMetrics is the API's Deps.PublicMetrics.
	publicMetrics bool
}

func newAPI(t *testing.T, opt apiOptions) *api {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "storelink.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	// As serve does: upload events name the API's path of the upload.
	orders := service.New(sqlite.NewDrivers(db), service.WithUploadStatusURL(httpapi.UploadStatusPath))
	if opt.capacity.Window == 0 {
		opt.capacity = storelink.CapacityPolicy{Base: 20 << 20, PerStore: 2 << 20, Window: time.Hour}
	}
	if opt.maxFileSize == 0 {
		opt.maxFileSize = 10 << 20
	}
	reg := prometheus.NewRegistry()
	proc := worker.NewProcessor(orders.Uploads, nil, "test", reg)
	deps := httpapi.Deps{
		Admin: orders.Partners, Auth: orders.Partners, Uploads: orders.Uploads, Stock: orders.Uploads, Orders: orders.Orders, Events: orders.Orders, Ping: db.Ping, AdminToken: adminToken,
		Capacity: opt.capacity, MaxFileSize: opt.maxFileSize, Accepted: proc.Wake, Registry: reg,
		MaxUploadsInFlight: opt.maxUploadsInFlight, BodyTimeout: opt.bodyTimeout, FirstByteTimeout: opt.firstByteTimeout,
		AuthLimit: opt.authLimit, TrustedProxies: opt.trustedProxies,
		MaxUploadMemory: opt.maxUploadMemory, UploadMemoryShare: opt.uploadMemoryShare, ValidationsPerMinute: opt.validationsPerMinute, Writes: opt.writes,
		Downloads: opt.downloads, TestSends: opt.testSends, DatabaseTimeout: opt.databaseTimeout,
		PublicMetrics: opt.publicMetrics,
	}
	if opt.uploads != nil {
		deps.Uploads = opt.uploads(orders.Uploads)
	}
	var webhooks *service.Services
	if opt.webhooks != nil {
		webhooks, deps.Delivering = wireWebhooks(t, orders, reg, &deps, *opt.webhooks)
	}
	handler := httpapi.NewServer(deps)
	srv := httptest.NewServer(handler)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	if opt.noProcessor {
		close(done)
	} else {
		go func() { _ = proc.Run(ctx); close(done) }()
	}
	t.Cleanup(func() { srv.Close(); cancel(); <-done })

	a := &api{t: t, URL: srv.URL, db: db, svc: orders, webhooks: webhooks, reg: reg, srv: handler}
	var p storelink.Partner
	a.admin("POST", "/admin/partners", `{"name":"Acme"}`, 201, &p)
	var c storelink.NewClient
	a.admin("POST", "/admin/partners/"+p.ID+"/clients", `{"country_code":"DE","currency":"EUR"}`, 201, &c)
	a.ClientID, a.APIKey, a.PartnerID = c.ID, c.APIKey, p.ID
	for _, s := range []string{"S1", "S2"} {
		a.admin("PUT", "/admin/clients/"+c.ID+"/stores/"+s, `{"name":"Store `+s+`"}`, 201, nil)
	}
	return a
}

// do sends a request and returns the response with its body read.
func (a *api) do(method, path string, body io.Reader, header map[string]string) (*http.Response, []byte) {
	a.t.Helper()
	req, err := http.NewRequest(method, a.URL+path, body)
	if err != nil {
		a.t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// admin sends an operator call, its body (if any) as JSON, checks the
// status and decodes the answer.
func (a *api) admin(method, path, body string, want int, v any) []byte {
	a.t.Helper()
	resp, b := a.do(method, path, strings.NewReader(body), jsonHeader(body, "Authorization", "Bearer "+adminToken))
	if resp.StatusCode != want {
		a.t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, b, want)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			a.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return b
}

// jsonHeader is a request's header of the pairs given, with Content-Type:
// application/json when it has a body.
func jsonHeader(body string, pairs ...string) map[string]string {
	h := map[string]string{}
	for i := 0; i+1 < len(pairs); i += 2 {
		h[pairs[i]] = pairs[i+1]
	}
	if body != "" {
		h["Content-Type"] = "application/json"
	}
	return h
}

// upload PUTs a stock file with the demo client's key.
func (a *api) upload(name string, body []byte, header map[string]string) (*http.Response, []byte) {
	a.t.Helper()
	h := map[string]string{"x-api-key": a.APIKey, "Content-Type": "application/csv"}
	for k, v := range header {
		h[k] = v
	}
	return a.do("PUT", "/stock/"+a.ClientID+"/"+name, bytes.NewReader(body), h)
}

// waitUpload polls the status until the upload is final.
func (a *api) waitUpload(id string) storelink.Upload {
	a.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, b := a.do("GET", "/stock/"+a.ClientID+"/uploads/"+id, nil, map[string]string{"x-api-key": a.APIKey})
		var u storelink.Upload
		if resp.StatusCode != 200 || json.Unmarshal(b, &u) != nil {
			a.t.Fatalf("status of %s = %d %s", id, resp.StatusCode, b)
		}
		if u.Status.Final() {
			return u
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("upload %s still %s", id, u.Status)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// problem decodes a problem+json answer and checks its status and shape.
func problem(t *testing.T, resp *http.Response, body []byte, status int) httpapi.Problem {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status = %d %s, want %d", resp.StatusCode, body, status)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type = %q, want application/problem+json", ct)
	}
	var p httpapi.Problem
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	if p.Status != status || p.Type == "" || p.Title == "" || p.Detail == "" {
		t.Fatalf("problem = %+v, want type, title, status %d and detail", p, status)
	}
	return p
}

// rawRequest sends bytes as they are, for paths a Go client would not send.
func rawRequest(t *testing.T, base, request string) string {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte(request)); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(conn)
	return string(b)
}

const feed = "store;ean;article_number;quantity;price;retail_price;store_article_location\n" +
	"\"S1\";\"4006381333931\";\"SKU-123\";5;19.99;29.99;\"Dept 3\"\n"
