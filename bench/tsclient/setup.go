package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// client is the run's partner client on serve, and the run's own calls to
// serve, made with net/http to check the example by.
type client struct {
	url      string
	http     *http.Client
	clientID string
	key      string
}

// setup makes a partner with a client for DE, its stores S1, S2 and S3 (as
// serve --demo has them, which stock.csv names), stock at S1 of the
// article the orders buy (not one stock.csv sets), and the orders whose
// events the example reads.
func (c *client) setup(ctx context.Context) error {
	var p struct {
		ID string `json:"partner_id"`
	}
	if err := c.send(ctx, "POST", "/admin/partners", `{"name":"TypeScript Retail"}`, 201, &p); err != nil {
		return err
	}
	var cl struct {
		ID  string `json:"client_id"`
		Key string `json:"api_key"`
	}
	if err := c.send(ctx, "POST", "/admin/partners/"+p.ID+"/clients", `{"country_code":"DE","currency":"EUR"}`, 201, &cl); err != nil {
		return err
	}
	c.clientID, c.key = cl.ID, cl.Key
	for _, s := range []string{"S1", "S2", "S3"} {
		if err := c.send(ctx, "PUT", "/admin/clients/"+c.clientID+"/stores/"+s, `{}`, 201, nil); err != nil {
			return err
		}
	}
	if err := c.stock(ctx); err != nil {
		return err
	}
	for n := 1; n <= orders; n++ {
		if err := c.order(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// stock uploads 1000 of the orders' article at S1 and waits until the
// upload is applied.
func (c *client) stock(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, "PUT", c.url+"/stock/"+c.clientID+"/setup.csv",
		strings.NewReader("store;ean;article_number;quantity;price\nS1;4006381333948;SKU-1;1000;9.99\n"))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "text/csv")
	req.Header.Set("x-api-key", c.key)
	var u struct {
		ID string `json:"upload_id"`
	}
	if err := c.do(req, 200, &u); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var st struct {
			Status string `json:"status"`
		}
		if err := c.getJSON(ctx, "/stock/"+c.clientID+"/uploads/"+u.ID, &st); err != nil {
			return err
		}
		switch st.Status {
		case "applied":
			return nil
		case "accepted", "processing":
		default:
			return fmt.Errorf("the set-up's stock upload is %s", st.Status)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the set-up's stock upload is still %s after 30s", st.Status)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// order places the marketplace's order TS-n of one item at S1.
func (c *client) order(ctx context.Context, n int) error {
	body := fmt.Sprintf(`{"order_number":"TS-%d","client_id":%q,"store_id":"S1","items":[{"ean":"4006381333948","marketplace_article_number":"MP-1"}]}`, n, c.clientID)
	return c.send(ctx, "POST", "/orders", body, 201, nil)
}

// send makes an operator's JSON call and decodes its answer into v (nil:
// not read), failing on another status than want.
func (c *client) send(ctx context.Context, method, path, body string, want int, v any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.url+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	return c.do(req, want, v)
}

// getJSON GETs path with the API key and decodes the 200 answer into v.
func (c *client) getJSON(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, "GET", c.url+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("x-api-key", c.key)
	return c.do(req, 200, v)
}

// get GETs path with the API key and returns the 200 answer's body.
func (c *client) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", c.url+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("x-api-key", c.key)
	return c.body(req, 200)
}

func (c *client) do(req *http.Request, want int, v any) error {
	b, err := c.body(req, want)
	if err != nil || v == nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s %s: %v in %s", req.Method, req.URL.Path, err, b)
	}
	return nil
}

func (c *client) body(req *http.Request, want int) ([]byte, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	if resp.StatusCode != want {
		return nil, fmt.Errorf("%s %s: %d, not %d: %s", req.Method, req.URL.Path, resp.StatusCode, want, bytes.TrimSpace(b))
	}
	return b, nil
}
