package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// inputToken is the admin token of the bad-input tests' serves.
const inputToken = "input-probe-admin-token-0123456789abcdef"

// inputProbe is one request with bad input and the answer it must get.
// In method, path, body and the header values, {cid}, {pid} and {order}
// stand for the demo client, its partner and an order made beforehand.
type inputProbe struct {
	name, method, path, body string
	header                   map[string]string
	status                   int    // the status wanted
	detail                   string // a part of the problem's detail; "" for a 2xx
}

// inputProbes are the requests that answered 500 on PostgreSQL (NUL bytes
// and invalid UTF-8 in query parameters and JSON strings) and their kin:
// every place a string enters (path values, query parameters, headers, JSON
// bodies), each kind of bad text.
var inputProbes = []inputProbe{
	// Query parameters.
	{"stock store NUL", "GET", "/stock/{cid}/stock?store=%00", "", nil, 400, `Query parameter "store" holds the control character U+0000 at character 1`},
	{"stock ean FF", "GET", "/stock/{cid}/stock?ean=%FF", "", nil, 400, `Query parameter "ean" is not valid UTF-8`},
	{"stock after NUL", "GET", "/stock/{cid}/stock?after=%00", "", nil, 400, `Query parameter "after"`},
	{"uploads before NUL", "GET", "/stock/{cid}/uploads?before=%00", "", nil, 400, `Query parameter "before"`},
	{"uploads before garbage", "GET", "/stock/{cid}/uploads?before=garbage", "", nil, 400, `before "garbage" is not a cursor returned by this call.`},
	{"orders client_id FF", "GET", "/orders?client_id=%FF", "", nil, 400, `Query parameter "client_id" is not valid UTF-8`},
	{"orders client_id NUL", "GET", "/orders?client_id=%00", "", nil, 400, `Query parameter "client_id" holds the control character U+0000`},
	{"orders order_number NUL", "GET", "/orders?order_number=A%00", "", nil, 400, `Query parameter "order_number" holds the control character U+0000 at character 2`},
	{"orders state NUL", "GET", "/orders?state=%00", "", nil, 400, `Query parameter "state"`},
	{"orders before FF", "GET", "/orders?before=%FF", "", nil, 400, `Query parameter "before" is not valid UTF-8`},
	{"orders before garbage", "GET", "/orders?before=garbage", "", nil, 400, `before "garbage" is not a cursor returned by this call.`},
	{"deliveries before garbage", "GET", "/admin/deliveries?before=garbage", "", nil, 400, `before "garbage" is not a cursor returned by this call.`},
	{"orders before C1", "GET", "/orders?before=%C2%85", "", nil, 400, `control character U+0085`},
	{"orders bad escape", "GET", "/orders?client_id=%zz", "", nil, 400, `The query string cannot be parsed`},
	{"orders parameter name NUL", "GET", "/orders?%00=1", "", nil, 400, `The query parameter name "\x00"`},
	{"deliveries client_id NUL", "GET", "/admin/deliveries?client_id=%00", "", nil, 400, `Query parameter "client_id"`},
	{"deliveries before FF", "GET", "/admin/deliveries?before=%FF", "", nil, 400, `Query parameter "before"`},
	{"events after NUL", "GET", "/events/{cid}?after=%00", "", nil, 400, `Query parameter "after"`},
	{"dashboard orders client_id NUL", "GET", "/dashboard/orders?client_id=%00", "", nil, 400, `Query parameter "client_id"`},
	{"orders order_number tab", "GET", "/orders?order_number=A%091", "", nil, 200, ""},
	{"orders limit twice", "GET", "/orders?limit=1&limit=2", "", nil, 400, `Query parameter "limit" is given 2 times; each parameter may be given once.`},
	{"dashboard state twice", "GET", "/dashboard/orders?state=new&state=new", "", nil, 400, `Query parameter "state" is given 2 times`},

	// Path values.
	{"upload id NUL", "GET", "/stock/{cid}/uploads/%00", "", nil, 400, `Path segment 4 ("\x00") holds the control character U+0000`},
	{"client id FF", "GET", "/stock/%FF/uploads", "", nil, 400, `Path segment 2 ("\xff") is not valid UTF-8`},
	{"order id NUL", "GET", "/orders/%00", "", nil, 400, `Path segment 2`},
	{"order events FF", "GET", "/orders/%FF/events", "", nil, 400, `Path segment 2`},
	{"admin client NUL", "GET", "/admin/clients/%00", "", nil, 400, `Path segment 3`},
	{"cancel NUL", "POST", "/orders/%00/cancel", `{}`, nil, 400, `Path segment 2`},
	{"file name NUL", "PUT", "/stock/{cid}/a%00.csv", "store;ean\n", nil, 400, `Path segment 3`},
	{"api key id FF", "DELETE", "/admin/clients/{cid}/api-keys/%FF", "", nil, 400, `Path segment 5`},
	{"endpoint NUL", "PATCH", "/admin/webhooks/%00", `{"enabled":true}`, nil, 400, `Path segment 3`},
	{"delivery FF", "POST", "/admin/deliveries/%FF/redeliver", "", nil, 400, `Path segment 3`},
	{"store id C1", "PUT", "/admin/clients/{cid}/stores/S%C2%85", `{"name":"x"}`, nil, 400, `Path segment 5`},
	{"partner NUL", "POST", "/admin/partners/%00/clients", `{"country_code":"DE","currency":"EUR"}`, nil, 400, `Path segment 3`},

	// Headers that reach a store.
	{"idempotency key FF", "POST", "/orders", `{"order_number":"I-1","client_id":"{cid}","items":[{"ean":"4006381333931","marketplace_article_number":"m"}]}`,
		map[string]string{"Idempotency-Key": "k\xff"}, 400, `Idempotency-Key must be printable ASCII`},
	{"api key FF", "GET", "/stock/{cid}/uploads", "", map[string]string{"x-api-key": "slk_\xff"}, 401, `A valid x-api-key header`},

	// JSON bodies: the raw bytes.
	{"partner name NUL", "POST", "/admin/partners", `{"name":"a\u0000b"}`, nil, 400, `The value at name holds a NUL character`},
	{"partner name FF", "POST", "/admin/partners", "{\"name\":\"a\xffb\"}", nil, 400, `The body is not valid UTF-8: byte 11 is 0xff`},
	{"partner name surrogate", "POST", "/admin/partners", `{"name":"\ud800"}`, nil, 400, `escaped UTF-16 surrogate`},
	{"partner duplicate key", "POST", "/admin/partners", `{"name":"x","name":"y"}`, nil, 400, `The key "name" appears twice in the top-level object`},
	{"client duplicate key by case", "POST", "/admin/partners/{pid}/clients", `{"country_code":"DE","Country_Code":"FR","currency":"EUR"}`, nil, 400,
		`The keys "country_code" and "Country_Code" in the top-level object are the same key`},
	{"client country NUL", "POST", "/admin/partners/{pid}/clients", `{"country_code":"D\u0000","currency":"EUR"}`, nil, 400, `The value at country_code holds a NUL`},
	{"key NUL", "POST", "/admin/partners", `{"na\u0000me":"x"}`, nil, 400, `A key in the top-level object holds a NUL`},
	{"store name NUL", "PUT", "/admin/clients/{cid}/stores/S9", `{"name":"x\u0000"}`, nil, 400, `The value at name holds a NUL`},
	{"order number NUL", "POST", "/orders", `{"order_number":"A\u0000","client_id":"{cid}","items":[{"ean":"4006381333931","marketplace_article_number":"m"}]}`, nil, 400, `The value at order_number holds a NUL`},
	{"order client NUL", "POST", "/orders", `{"order_number":"A1","client_id":"{cid}\u0000","items":[{"ean":"4006381333931","marketplace_article_number":"m"}]}`, nil, 400, `The value at client_id holds a NUL`},
	{"order store NUL", "POST", "/orders", `{"order_number":"A1","client_id":"{cid}","store_id":"S\u0000","items":[{"ean":"4006381333931","marketplace_article_number":"m"}]}`, nil, 400, `The value at store_id holds a NUL`},
	{"order item NUL", "POST", "/orders", `{"order_number":"A1","client_id":"{cid}","items":[{"ean":"4006381333931","marketplace_article_number":"m"},{"ean":"4006381333931","marketplace_article_number":"m\u0000"}]}`, nil, 400,
		`The value at items[1].marketplace_article_number holds a NUL`},
	{"order address NUL", "POST", "/orders", `{"order_number":"A1","client_id":"{cid}","items":[{"ean":"4006381333931","marketplace_article_number":"m"}],"customer_billing_address":{"city":"\u0000"}}`, nil, 400,
		`The value at customer_billing_address.city holds a NUL`},
	{"order duplicate item key", "POST", "/orders", `{"order_number":"A1","client_id":"{cid}","items":[{"ean":"4006381333931","ean":"5901234123457","marketplace_article_number":"m"}]}`, nil, 400,
		`The key "ean" appears twice in the object at items[0]`},
	{"fulfil tracking NUL", "POST", "/orders/{order}/fulfil", `{"delivery_details":{"delivery_tracking_number":"T\u0000"}}`, nil, 400, `delivery_details.delivery_tracking_number holds a NUL`},
	{"cancel item NUL", "POST", "/orders/{order}/cancel", `{"items":[{"item_id":"\u0000"}]}`, nil, 400, `items[0].item_id holds a NUL`},
	{"webhook URL NUL", "POST", "/admin/clients/{cid}/webhooks", `{"url":"http://127.0.0.1:8090/x\u0000"}`, nil, 400, `The value at url holds a NUL`},
	{"webhook states NUL", "POST", "/admin/clients/{cid}/webhooks", `{"url":"http://127.0.0.1:8090/x","states":["\u0000"]}`, nil, 400, `The value at states[0] holds a NUL`},

	// Control characters where a name or number is written: the domain's
	// rule, 422 naming the field.
	{"partner name SOH", "POST", "/admin/partners", `{"name":"a\u0001b"}`, nil, 422, `name holds the control character U+0001 at character 2; only tab is allowed.`},
	{"store name BEL", "PUT", "/admin/clients/{cid}/stores/S9", `{"name":"x\u0007"}`, nil, 422, `name holds the control character U+0007`},
	{"order number SOH", "POST", "/orders", `{"order_number":"A\u0001","client_id":"{cid}","items":[{"ean":"4006381333931","marketplace_article_number":"m"}]}`, nil, 422,
		`order_number holds the control character U+0001 at character 2`},
	{"article number ESC", "POST", "/orders", `{"order_number":"A1","client_id":"{cid}","items":[{"ean":"4006381333931","marketplace_article_number":"m","article_number":"SKU\u001b"}]}`, nil, 422,
		`items[0].article_number holds the control character U+001B`},
	{"warehouse order number LF", "POST", "/warehouse-orders", `{"order_number":"W\n1","client_id":"{cid}","items":[{"ean":"4006381333931","marketplace_article_number":"m"}]}`, nil, 422,
		`order_number holds the control character U+000A`},
	{"fulfil carrier DEL", "POST", "/orders/{order}/fulfil", `{"delivery_details":{"delivery_carrier_name":"D\u007f"}}`, nil, 422,
		`delivery_details.delivery_carrier_name holds the control character U+007F`},

	// Invisible format characters where a name, a store id or a file name
	// is written.
	{"partner name RLO", "POST", "/admin/partners", `{"name":"Acme\u202eGmbH"}`, nil, 422,
		`name contains U+202E (RIGHT-TO-LEFT OVERRIDE) at character 5, an invisible format character.`},
	{"store name ZWSP", "PUT", "/admin/clients/{cid}/stores/S9", `{"name":"Berlin\u200b"}`, nil, 422, `name contains U+200B (ZERO WIDTH SPACE) at character 7`},
	{"store id LRI", "PUT", "/admin/clients/{cid}/stores/S%E2%81%A69", `{"name":"x"}`, nil, 400, `store_id contains U+2066 (LEFT-TO-RIGHT ISOLATE) at character 2`},
	{"file name RLO", "PUT", "/stock/{cid}/invoice%E2%80%AEvsc.csv", "store;ean\n", nil, 400, `The file name contains U+202E (RIGHT-TO-LEFT OVERRIDE) at character 8`},
	{"file name BOM", "PUT", "/stock/{cid}/%EF%BB%BFfeed.csv", "store;ean\n", nil, 400, `The file name contains U+FEFF (ZERO WIDTH NO-BREAK SPACE) at character 1`},

	// Webhook URL ports.
	{"webhook port 0", "POST", "/admin/clients/{cid}/webhooks", `{"url":"http://127.0.0.1:0/x"}`, nil, 422, `url: the port must be 1 to 65535 (got 0).`},
	{"webhook port 70000", "POST", "/admin/clients/{cid}/webhooks", `{"url":"http://127.0.0.1:70000/x"}`, nil, 422, `url: the port must be 1 to 65535 (got 70000).`},
	{"webhook port patch", "PATCH", "/admin/webhooks/{endpoint}", `{"url":"http://127.0.0.1:65536/x"}`, nil, 422, `url: the port must be 1 to 65535`},
}

// inputAnswer is what a probe got, with the ids of the installation
// replaced by their placeholders so two installations compare.
type inputAnswer struct {
	Status      int
	ContentType string
	Detail      string
}

// inputServe is a serve with the demo data, stock for two EANs at S1 and
// one assigned order.
type inputServe struct {
	*proc
	order, endpoint string
}

func startInputServe(t *testing.T, args ...string) *inputServe {
	t.Helper()
	p := startServe(t, t.TempDir(), append([]string{"--demo", "--admin-token", inputToken}, args...)...)
	if p.ClientID == "" || p.PartnerID == "" {
		t.Fatalf("serve --demo printed no client or partner:\n%s", p.stdout)
	}
	s := &inputServe{proc: p}
	code, u := p.upload(t, "stock.csv", []byte("store;ean;article_number;quantity;price\nS1;4006381333931;SKU-1;50;19.99\nS1;5901234123457;SKU-2;50;5.00\n"))
	if code != 200 {
		t.Fatalf("stock upload = %d %v", code, u)
	}
	if u := p.waitUpload(t, u["upload_id"].(string), 30*time.Second); u["status"] != "applied" {
		t.Fatalf("stock upload = %v", u)
	}
	status, b := s.call(t, "POST", "/orders", `{"order_number":"SETUP-1","client_id":"{cid}","items":[{"ean":"4006381333931","marketplace_article_number":"m"}]}`, nil)
	var o struct {
		OrderID string `json:"order_id"`
	}
	if status != 201 || json.Unmarshal(b, &o) != nil || o.OrderID == "" {
		t.Fatalf("setup order = %d %s", status, b)
	}
	s.order = o.OrderID
	status, b = s.call(t, "GET", "/admin/clients/{cid}", "", nil)
	var c struct {
		Endpoints []struct {
			ID string `json:"endpoint_id"`
		} `json:"webhook_endpoints"`
	}
	if status != 200 || json.Unmarshal(b, &c) != nil || len(c.Endpoints) != 1 {
		t.Fatalf("client = %d %s, want the demo endpoint", status, b)
	}
	s.endpoint = c.Endpoints[0].ID
	return s
}

func (s *inputServe) expand(v string) string {
	return strings.NewReplacer("{cid}", s.ClientID, "{pid}", s.PartnerID, "{order}", s.order, "{endpoint}", s.endpoint).Replace(v)
}

func (s *inputServe) placeholders(v string) string {
	r := []string{s.ClientID, "{cid}", s.PartnerID, "{pid}"}
	if s.order != "" {
		r = append(r, s.order, "{order}")
	}
	if s.endpoint != "" {
		r = append(r, s.endpoint, "{endpoint}")
	}
	return strings.NewReplacer(r...).Replace(v)
}

// call sends a request with the admin token and the API key (each call
// takes the one it needs) and returns the status and body.
func (s *inputServe) call(t *testing.T, method, path, body string, header map[string]string) (int, []byte) {
	t.Helper()
	st, _, b := s.callCT(t, method, path, body, header)
	return st, b
}

func (s *inputServe) callCT(t *testing.T, method, path, body string, header map[string]string) (int, string, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.URL+s.expand(path), strings.NewReader(s.expand(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+inputToken)
	req.Header.Set("x-api-key", s.APIKey)
	if strings.HasPrefix(path, "/stock/") && method == "PUT" {
		req.Header.Set("Content-Type", "text/csv")
	} else if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header[http.CanonicalHeaderKey(k)] = []string{v}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// probe sends every probe and checks each answer: the status wanted, a
// problem+json with the detail wanted, never a 500.
func (s *inputServe) probe(t *testing.T) map[string]inputAnswer {
	t.Helper()
	got := map[string]inputAnswer{}
	for _, pr := range inputProbes {
		status, ct, b := s.callCT(t, pr.method, pr.path, pr.body, pr.header)
		a := inputAnswer{Status: status, ContentType: ct}
		if status >= 400 {
			var p struct {
				Status int    `json:"status"`
				Detail string `json:"detail"`
			}
			if err := json.Unmarshal(b, &p); err != nil || p.Status != status {
				t.Errorf("%s: %d %s, not a problem with its status", pr.name, status, b)
			}
			a.Detail = s.placeholders(p.Detail)
		}
		got[pr.name] = a
		switch {
		case status != pr.status:
			t.Errorf("%s: %s %s = %d %s, want %d", pr.name, pr.method, pr.path, status, b, pr.status)
		case status >= 400 && ct != "application/problem+json":
			t.Errorf("%s: Content-Type %q, want application/problem+json", pr.name, ct)
		case !strings.Contains(a.Detail, pr.detail):
			t.Errorf("%s: detail %q, want it to contain %q", pr.name, a.Detail, pr.detail)
		}
	}
	// Nothing of the refused requests was stored: the order is still
	// assigned with its one item, the client has its three stores and one
	// endpoint, and no error was logged.
	status, b := s.call(t, "GET", "/orders/{order}", "", nil)
	if status != 200 || !strings.Contains(string(b), `"state":"assigned"`) || strings.Contains(string(b), "delivery_details") {
		t.Errorf("setup order after the probes = %d %s, want it assigned and unchanged", status, b)
	}
	status, b = s.call(t, "GET", "/admin/clients/{cid}", "", nil)
	var c struct {
		Stores    []json.RawMessage `json:"stores"`
		Endpoints []json.RawMessage `json:"webhook_endpoints"`
	}
	if status != 200 || json.Unmarshal(b, &c) != nil || len(c.Stores) != 3 || len(c.Endpoints) != 1 {
		t.Errorf("client after the probes = %d %s, want the three demo stores and one endpoint", status, b)
	}
	if strings.Contains(s.stderr.String(), `"internal error"`) {
		t.Errorf("serve logged an internal error:\n%s", s.stderr)
	}
	return got
}

// TestInputProbes sends bad text through every way in (path
// values, query parameters, headers, JSON bodies) to a serve on SQLite and
// one on PostgreSQL: each answers 400 or 422 problem+json saying what and
// where, never 500, and both give the same status and detail.
func TestInputProbes(t *testing.T) {
	t.Parallel()
	var sqlite, pg map[string]inputAnswer
	t.Run("sqlite", func(t *testing.T) {
		sqlite = startInputServe(t).probe(t)
	})
	t.Run("postgres", func(t *testing.T) {
		dbURL, _ := pgSchemaURL(t)
		pg = startInputServe(t, "--database", dbURL).probe(t)
	})
	if sqlite == nil || pg == nil {
		return
	}
	for _, pr := range inputProbes {
		if sqlite[pr.name] != pg[pr.name] {
			t.Errorf("%s: SQLite answered %+v, PostgreSQL %+v", pr.name, sqlite[pr.name], pg[pr.name])
		}
	}
}

// TestInputCSV: a CR-only file is rejected as a CSV File Error
// that says CR-only line ends are not supported, by /validate and as an
// upload; a CRLF file with a bare CR inside quotes is applied; a row with a
// control character in a text column is dropped as Invalid column value
// naming its line and column.
func TestInputCSV(t *testing.T) {
	t.Parallel()
	s := startInputServe(t)
	crOnly := "store;ean;article_number;quantity;price\rS1;4006381333931;SKU-1;7;19.99\r"
	status, b := s.call(t, "PUT", "/stock/{cid}/validate", crOnly, nil)
	var v struct {
		Result string `json:"result"`
		Errors []struct {
			Type        string `json:"type"`
			Message     string `json:"message"`
			LineNumbers []struct {
				LineNumber int `json:"line_number"`
			} `json:"line_numbers"`
		} `json:"errors"`
	}
	if status != 200 || json.Unmarshal(b, &v) != nil || v.Result != "invalid" || len(v.Errors) != 1 ||
		v.Errors[0].Type != "CSV File Error" || !strings.Contains(v.Errors[0].Message, "CR-only line ends are not supported") {
		t.Fatalf("validate CR-only = %d %s, want invalid with one CSV File Error about CR-only line ends", status, b)
	}
	code, u := s.upload(t, "cr.csv", []byte(crOnly))
	if code != 200 {
		t.Fatalf("upload CR-only = %d %v", code, u)
	}
	got := s.waitUpload(t, u["upload_id"].(string), 30*time.Second)
	if errs, _ := json.Marshal(got["errors"]); got["status"] != "rejected" || got["rows_applied"] != float64(0) ||
		!strings.Contains(string(errs), `"type":"CSV File Error"`) || !strings.Contains(string(errs), "CR-only line ends are not supported") {
		t.Fatalf("CR-only upload = %v, want rejected with the CSV File Error", got)
	}

	// CRLF line ends, a bare CR and a CRLF inside quotes: applied.
	crlf := "store;ean;article_number;quantity;price;product_name\r\nS1;4006381333931;SKU-1;8;19.99;\"one\rtwo\"\r\nS1;5901234123457;SKU-2;9;5.00;\"three\r\nfour\"\r\n"
	code, u = s.upload(t, "crlf.csv", []byte(crlf))
	if code != 200 {
		t.Fatalf("upload CRLF = %d %v", code, u)
	}
	if got := s.waitUpload(t, u["upload_id"].(string), 30*time.Second); got["status"] != "applied" || got["rows_applied"] != float64(2) {
		t.Fatalf("CRLF upload = %v, want applied with two rows", got)
	}

	// A control character in a text column drops its row, named by line
	// and column.
	rows := "store;ean;article_number;quantity;price;product_name\n" +
		"S1;4006381333931;SKU\x01A;1;19.99;\n" +
		"S1;5901234123457;SKU-2;1;5.00;Bell\x07\n" +
		"S1;4006381333931;SKU-1;3;19.99;Pen\n"
	status, b = s.call(t, "PUT", "/stock/{cid}/validate", rows, nil)
	v.Errors = nil
	if status != 200 || json.Unmarshal(b, &v) != nil || len(v.Errors) != 2 {
		t.Fatalf("validate control characters = %d %s, want two errors", status, b)
	}
	for i, want := range []struct {
		column string
		line   int
	}{{"article_number", 2}, {"product_name", 3}} {
		e := v.Errors[i]
		if e.Type != "Invalid column value" || !strings.Contains(e.Message, `"`+want.column+`": must not hold control characters`) ||
			len(e.LineNumbers) != 1 || e.LineNumbers[0].LineNumber != want.line {
			t.Errorf("error %d = %+v, want Invalid column value for %s on line %d", i, e, want.column, want.line)
		}
	}
	code, u = s.upload(t, "ctl.csv", []byte(rows))
	if code != 200 {
		t.Fatalf("upload = %d %v", code, u)
	}
	if got := s.waitUpload(t, u["upload_id"].(string), 30*time.Second); got["status"] != "applied" || got["rows_applied"] != float64(1) || got["rows_rejected"] != float64(2) {
		t.Fatalf("upload with control characters = %v, want one row applied, two rejected", got)
	}
	status, b = s.call(t, "GET", "/stock/{cid}/stock?store=S1&ean=4006381333931", "", nil)
	if status != 200 || !strings.Contains(string(b), `"quantity":3`) || !bytes.Contains(b, []byte(`"article_number":"SKU-1"`)) {
		t.Errorf("stock after the upload = %d %s, want SKU-1 with quantity 3", status, b)
	}
}
