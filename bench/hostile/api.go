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

// goodAddr is the well-behaved partner's own address, as a reverse proxy in
// front of serve would name it in X-Forwarded-For; every connection of the
// harness comes from loopback.
const goodAddr = "198.51.100.7"

// client is one client account: its id and API key.
type client struct {
	id, key string
}

// accounts are the tenants of one serve: the well-behaved partner's client
// and the attacker partner's clients.
type accounts struct {
	good     client
	attacker []client
}

// adminClient makes the operator calls of the set-up, on keep-alive
// connections.
var adminClient = &http.Client{Timeout: 30 * time.Second}

// admin makes an operator call and decodes its JSON answer into out.
func admin(ctx context.Context, base, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := adminClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// newPartner makes a partner with n clients, each with stores S1 and S2.
func newPartner(ctx context.Context, base, name string, n int) ([]client, error) {
	var p struct {
		ID string `json:"partner_id"`
	}
	if err := admin(ctx, base, "POST", "/admin/partners", map[string]string{"name": name}, &p); err != nil {
		return nil, err
	}
	var out []client
	countries := []string{"DE", "AT", "FR", "NL", "BE", "IT", "ES", "PL", "CZ", "DK", "SE", "PT"}
	for i := range n {
		var c struct {
			ID     string `json:"client_id"`
			APIKey string `json:"api_key"`
		}
		body := map[string]string{"country_code": countries[i%len(countries)], "currency": "EUR"}
		if err := admin(ctx, base, "POST", "/admin/partners/"+p.ID+"/clients", body, &c); err != nil {
			return nil, err
		}
		for _, st := range []string{"S1", "S2"} {
			if err := admin(ctx, base, "PUT", "/admin/clients/"+c.ID+"/stores/"+st, map[string]string{"name": "Store " + st}, nil); err != nil {
				return nil, err
			}
		}
		out = append(out, client{id: c.ID, key: c.APIKey})
	}
	return out, nil
}

// setupAccounts makes the well-behaved partner (one client) and the
// attacker partner (attackerClients clients) on the serve at base.
func setupAccounts(ctx context.Context, base string, attackerClients int) (*accounts, error) {
	good, err := newPartner(ctx, base, "Well-behaved partner", 1)
	if err != nil {
		return nil, err
	}
	bad, err := newPartner(ctx, base, "Attacker partner", attackerClients)
	if err != nil {
		return nil, err
	}
	return &accounts{good: good[0], attacker: bad}, nil
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

// smallFeed is a valid feed of rows rows, its quantities set by seq.
func smallFeed(seq, rows int) []byte {
	var b bytes.Buffer
	b.WriteString("store;ean;article_number;quantity;price;retail_price\n")
	for i := range rows {
		fmt.Fprintf(&b, "S%d;%s;SKU-%d;%d;19.99;29.99\n", 1+i%2, ean13(400638133300+int64(i)), i, (seq+i)%50)
	}
	return b.Bytes()
}

// freshClient sends each request on a connection of its own, as a new
// client would: a server whose connection slots are taken answers it late
// or never, however its other connections fare.
func freshClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout:       timeout,
		Transport:     &http.Transport{DisableKeepAlives: true, DisableCompression: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// applyLags reads c's uploads received since since, as serve recorded them,
// and returns for each the time from its receipt to the end of its
// processing (to end for one still unfinished then), and how many were
// unfinished.
func applyLags(ctx context.Context, base string, c client, since, end time.Time) (lags []time.Duration, unfinished int, err error) {
	before := ""
	for range 100 { // pages of 500: far more than a phase uploads
		q := "?limit=500&since=" + since.UTC().Format(time.RFC3339Nano)
		if before != "" {
			q += "&before=" + before
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/stock/"+c.id+"/uploads"+q, nil)
		req.Header.Set("x-api-key", c.key)
		req.Header.Set("X-Forwarded-For", goodAddr)
		resp, err := adminClient.Do(req)
		if err != nil {
			return nil, 0, err
		}
		var page struct {
			Uploads []struct {
				ReceivedAt time.Time  `json:"received_at"`
				FinishedAt *time.Time `json:"finished_at"`
			} `json:"uploads"`
			NextBefore string `json:"next_before"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return nil, 0, fmt.Errorf("list uploads: %d %v", resp.StatusCode, err)
		}
		for _, u := range page.Uploads {
			if u.FinishedAt != nil {
				lags = append(lags, u.FinishedAt.Sub(u.ReceivedAt))
			} else {
				lags = append(lags, end.Sub(u.ReceivedAt))
				unfinished++
			}
		}
		if before = page.NextBefore; before == "" {
			break
		}
	}
	return lags, unfinished, nil
}
