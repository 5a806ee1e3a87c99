package genclient

import (
	"bytes"
	"context"
	"encoding/json"
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

const adminToken = "generated-client-test-admin-token-0123456789"

// startServer is a real server on SQLite with its upload processor, as
// serve runs them.
func startServer(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "storelink.db"))
	if err != nil {
		t.Fatal(err)
	}
	svc := service.New(sqlite.NewDrivers(db))
	reg := prometheus.NewRegistry()
	proc := worker.NewProcessor(svc.Uploads, nil, "test", reg)
	srv := httptest.NewServer(httpapi.NewServer(httpapi.Deps{
		Admin: svc.Partners, Auth: svc.Partners, Uploads: svc.Uploads, Stock: svc.Uploads, Orders: svc.Orders, Events: svc.Orders, Ping: db.Ping, AdminToken: adminToken,
		Capacity:    storelink.CapacityPolicy{Base: 20 << 20, PerStore: 2 << 20, Window: time.Hour},
		MaxFileSize: 10 << 20, Accepted: proc.Wake, Registry: reg,
	}))
	done := make(chan struct{})
	go func() { _ = proc.Run(ctx); close(done) }()
	t.Cleanup(func() { srv.Close(); cancel(); <-done; db.Close() })
	return srv.URL
}

func header(name, value string) RequestEditorFn {
	return func(_ context.Context, req *http.Request) error {
		req.Header.Set(name, value)
		return nil
	}
}

// The client generated from openapi.yaml, used as it comes: a partner and
// client made by the operator, an upload with a bad row, its status and
// errors.csv, an order routed by the stock the upload set, and the order's
// event read from the partner's pull feed.
func TestGeneratedClient(t *testing.T) {
	ctx := context.Background()
	c, err := NewClientWithResponses(startServer(t))
	if err != nil {
		t.Fatal(err)
	}
	admin := header("Authorization", "Bearer "+adminToken)

	p, err := c.CreatePartnerWithResponse(ctx, CreatePartnerJSONRequestBody{Name: "Acme"}, admin)
	if err != nil || p.JSON201 == nil {
		t.Fatalf("create partner: %v %s", err, body(p.Body))
	}
	cl, err := c.CreateClientWithResponse(ctx, p.JSON201.PartnerId, CreateClientJSONRequestBody{CountryCode: "DE", Currency: "EUR"}, admin)
	if err != nil || cl.JSON201 == nil {
		t.Fatalf("create client: %v %s", err, body(cl.Body))
	}
	clientID := cl.JSON201.ClientId
	key := header("x-api-key", cl.JSON201.ApiKey)
	if st, err := c.PutStoreWithResponse(ctx, clientID, "S1", PutStoreJSONRequestBody{}, admin); err != nil || st.StatusCode() != 201 {
		t.Fatalf("put store: %v %s", err, body(st.Body))
	}

	feed := "store;ean;article_number;quantity;price\n" +
		"S1;4006381333931;SKU-1;5;19.99\n" +
		"S9;4006381333931;SKU-2;5;19.99\n"
	up, err := c.UploadStockFileWithBodyWithResponse(ctx, clientID, "feed.csv", &UploadStockFileParams{}, "text/csv", strings.NewReader(feed), key)
	if err != nil || up.JSON200 == nil {
		t.Fatalf("upload: %v %s", err, body(up.Body))
	}
	uploadID := up.JSON200.UploadId
	var status *Upload
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, err := c.GetUploadWithResponse(ctx, clientID, uploadID, key)
		if err != nil || st.JSON200 == nil {
			t.Fatalf("upload status: %v %s", err, body(st.Body))
		}
		if st.JSON200.Status == UploadStatusApplied || st.JSON200.Status == UploadStatusRejected {
			status = st.JSON200
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("upload still %s after 10 s", st.JSON200.Status)
		}
	}
	if status.Status != UploadStatusApplied || status.RowsApplied != 1 || status.RowsRejected != 1 || !status.HasErrors || len(status.Errors) != 1 {
		t.Fatalf("upload = %s", body(mustJSON(status)))
	}
	if refs := status.Errors[0].LineNumbers; len(refs) != 1 || refs[0].Value == nil || *refs[0].Value != "S9" {
		t.Fatalf("the rejected line does not show its store S9: %s", body(mustJSON(status.Errors)))
	}
	for _, f := range []struct {
		has  bool
		want int
	}{{true, 1}, {false, 0}} {
		l, err := c.ListUploadsWithResponse(ctx, clientID, &ListUploadsParams{HasErrors: &f.has}, key)
		if err != nil || l.JSON200 == nil || len(l.JSON200.Uploads) != f.want {
			t.Fatalf("uploads with has_errors=%v: %v %s, want %d", f.has, err, body(l.Body), f.want)
		}
	}
	ef, err := c.GetUploadErrorFileWithResponse(ctx, clientID, uploadID, key)
	if err != nil || ef.StatusCode() != 200 || !bytes.HasPrefix(ef.Body, []byte("store;ean;article_number;quantity;price;line;problem_type;problem_detail\nS9;4006381333931;SKU-2;5;19.99;3;Store does not exist;")) {
		t.Fatalf("errors.csv: %v %d %s", err, ef.StatusCode(), body(ef.Body))
	}

	order, err := c.CreateOrderWithResponse(ctx, &CreateOrderParams{}, CreateOrderJSONRequestBody{
		ClientId: clientID, OrderNumber: "M-1", Items: []NewOrderItem{{Ean: "4006381333931", MarketplaceArticleNumber: "MA-1"}},
	}, admin)
	if err != nil || order.JSON201 == nil {
		t.Fatalf("create order: %v %s", err, body(order.Body))
	}
	if order.JSON201.State != OrderStateAssigned || order.JSON201.StoreId == nil || *order.JSON201.StoreId != "S1" {
		t.Fatalf("order = %s, want assigned to S1", body(order.Body))
	}
	events, err := c.PullEventsWithResponse(ctx, clientID, &PullEventsParams{}, key)
	if err != nil || events.JSON200 == nil || len(events.JSON200.Events) != 1 {
		t.Fatalf("events: %v %s", err, body(events.Body))
	}
	if ev := events.JSON200.Events[0]; ev.OrderId != order.JSON201.OrderId || ev.State != OrderEventStateAssigned {
		t.Fatalf("event = %s, want the order's assigned event", body(events.Body))
	}
}

// body is an answer's body for a failure message, cut to a readable size.
func body(b []byte) string {
	if len(b) > 2000 {
		b = b[:2000]
	}
	return string(b)
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
