package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// The walk's set-up calls go to serve directly and are not judged: they
// make the states the walked requests need (an upload still waiting, a
// delivery made).

// call makes a set-up request to serve and returns its status and body.
func (w *walker) call(ctx context.Context, method, path string, a auth, body []byte, ctype string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, w.serve+w.expand(path), bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	switch a {
	case authAdmin:
		req.Header.Set("Authorization", "Bearer "+adminToken)
	case authKey:
		req.Header.Set("x-api-key", w.vars["key"])
	}
	resp, err := w.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, b, err
}

// poll calls check every 50 ms until it is done, for at most 20 s.
func poll(ctx context.Context, what string, check func() (bool, error)) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		done, err := check()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within 20s", what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitProcessed waits until the upload named by the var is applied or
// rejected.
func waitProcessed(name string) func(context.Context, *walker) error {
	return func(ctx context.Context, w *walker) error {
		return poll(ctx, "upload "+w.vars[name]+" processed", func() (bool, error) {
			st, b, err := w.call(ctx, "GET", "/stock/<client>/uploads/<"+name+">", authKey, nil, "")
			if err != nil || st != 200 {
				return false, fmt.Errorf("GET the upload: %d %v %s", st, err, short(b, 200))
			}
			var u struct {
				Status string `json:"status"`
			}
			if err := json.Unmarshal(b, &u); err != nil {
				return false, err
			}
			return u.Status == "applied" || u.Status == "rejected", nil
		})
	}
}

// makeWaitingUpload uploads a large feed and then a small one, which waits
// behind the large one while it is processed (a client's uploads are
// processed in order): the var waiting names the small one.
func makeWaitingUpload(ctx context.Context, w *walker) error {
	st, b, err := w.call(ctx, "PUT", "/stock/<client>/walk-large.csv", authKey, largeFeed(), "text/csv")
	if err != nil || st != 200 {
		return fmt.Errorf("upload the large feed: %d %v %s", st, err, short(b, 200))
	}
	st, b, err = w.call(ctx, "PUT", "/stock/<client>/walk-waiting.csv", authKey, []byte(feedCSV), "text/csv")
	if err != nil || st != 200 {
		return fmt.Errorf("upload the small feed: %d %v %s", st, err, short(b, 200))
	}
	var u struct {
		ID string `json:"upload_id"`
	}
	if err := json.Unmarshal(b, &u); err != nil {
		return err
	}
	w.vars["waiting"] = u.ID
	return nil
}

// waitDelivery waits until the client has a webhook delivery to the
// endpoint named by the var endpoint, and keeps its id as the var name.
func waitDelivery(name, endpoint string) func(context.Context, *walker) error {
	return func(ctx context.Context, w *walker) error {
		return poll(ctx, "a delivery to endpoint "+w.vars[endpoint], func() (bool, error) {
			st, b, err := w.call(ctx, "GET", "/admin/deliveries?client_id=<client>&endpoint_id=<"+endpoint+">", authAdmin, nil, "")
			if err != nil || st != 200 {
				return false, fmt.Errorf("GET /admin/deliveries: %d %v %s", st, err, short(b, 200))
			}
			var l struct {
				Deliveries []struct {
					ID    string `json:"delivery_id"`
					State string `json:"state"`
				} `json:"deliveries"`
			}
			if err := json.Unmarshal(b, &l); err != nil {
				return false, err
			}
			for _, d := range l.Deliveries {
				if d.State != "pending" {
					w.vars[name] = d.ID
					return true, nil
				}
			}
			return false, nil
		})
	}
}

// feedCSV is a feed of two valid rows of store S1 and one with an EAN that
// is none (dropped, so that the upload has an error file).
const feedCSV = "store;ean;article_number;quantity;price\n" +
	"S1;4006381333931;SKU-1;50;19.99\n" +
	"S1;4006381333948;SKU-2;50;9.99\n" +
	"S1;1234;SKU-3;1;1.00\n"

// largeFeed is a valid feed of about 3 MiB: its processing takes long
// enough (a few hundred ms) for an upload sent after it to be cancelled.
func largeFeed() []byte {
	var b bytes.Buffer
	b.WriteString("store;ean;article_number;quantity;price\n")
	for i := 0; b.Len() < 3<<20; i++ {
		fmt.Fprintf(&b, "S1;%s;SKU-L%d;1;1.00\n", ean13(200000000000+int64(i)), i)
	}
	return b.Bytes()
}

// ean13 returns the EAN-13 of a 12-digit number with its check digit.
func ean13(n int64) string {
	s := fmt.Sprintf("%012d", n%1_000_000_000_000)
	sum := 0
	for i, c := range s {
		d := int(c - '0')
		if i%2 == 1 {
			d *= 3
		}
		sum += d
	}
	return s + string(rune('0'+(10-sum%10)%10))
}
