package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// wrongKey looks like an API key and is none.
const wrongKey = "slk_0000000000000000000000000000000000000000000000000000000000000000"

// loginProxy is everyone behind the reverse proxy guessing: wrong API keys
// (on the attacker's clients and on the well-behaved one), wrong admin
// tokens, refused portal sign-ins and dashboard logins, 20 a second from
// 127.0.0.1 (the proxy), each naming one of 50 addresses in
// X-Forwarded-For, none of them the well-behaved partner's.
func loginProxy(ctx context.Context, e *env) {
	hc := freshClient(10 * time.Second)
	for i := 0; ctx.Err() == nil; i++ {
		var req *http.Request
		switch i % 5 {
		case 0:
			req, _ = http.NewRequestWithContext(ctx, "GET", e.base+"/stock/"+e.acc.attacker[i%len(e.acc.attacker)].id+"/uploads", nil)
			req.Header.Set("x-api-key", wrongKey)
		case 1:
			req, _ = http.NewRequestWithContext(ctx, "GET", e.base+"/stock/"+e.acc.good.id+"/uploads", nil)
			req.Header.Set("x-api-key", wrongKey)
		case 2:
			req, _ = http.NewRequestWithContext(ctx, "GET", e.base+"/admin/partners", nil)
			req.Header.Set("Authorization", "Bearer "+strings.Repeat("x", 40))
		case 3:
			form := url.Values{"client_id": {e.acc.good.id}, "api_key": {wrongKey}}.Encode()
			req, _ = http.NewRequestWithContext(ctx, "POST", e.base+"/portal/login", strings.NewReader(form))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		case 4:
			form := url.Values{"token": {strings.Repeat("y", 40)}}.Encode()
			req, _ = http.NewRequestWithContext(ctx, "POST", e.base+"/dashboard/login", strings.NewReader(form))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		req.Header.Set("X-Forwarded-For", fmt.Sprintf("203.0.113.%d", 1+i%50))
		resp, err := hc.Do(req)
		if err == nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
		}
		e.tally.answer(ctx, "guess", resp, err)
		if !pace(ctx, 50*time.Millisecond) {
			return
		}
	}
}

// loginFlood fails to authenticate from 12,000 loopback addresses (more
// than the 10,000 serve's failed-login table holds; 127.1.0.0 to
// 127.1.46.223, each connection bound to one), one connection each, 16 at
// once: 4 failures on each connection (so that each address stays in the
// table about 12 s, the attack's length, at 20 failures a minute), wrong
// admin tokens and wrong API keys for the well-behaved partner's client.
func loginFlood(ctx context.Context, e *env) {
	const addrs, perConn, workers = 12000, 4, 16
	token := "GET /admin/partners HTTP/1.1\r\nHost: " + e.addr + "\r\nAuthorization: Bearer " + strings.Repeat("z", 40) + "\r\n\r\n"
	key := "GET /stock/" + e.acc.good.id + "/uploads HTTP/1.1\r\nHost: " + e.addr + "\r\nx-api-key: " + wrongKey + "\r\n\r\n"
	var n atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				a := int(n.Add(1)) - 1
				if a >= addrs {
					return
				}
				local := &net.TCPAddr{IP: net.IPv4(127, 1, byte(a>>8), byte(a))}
				nc, err := dialRaw(ctx, e.addr, local, 0)
				if err != nil {
					if ctx.Err() == nil {
						e.tally.add("dial " + failOf(err))
					}
					continue
				}
				br := bufio.NewReader(nc)
				for i := range perConn {
					what, req := "token", token
					if i%2 == 1 {
						what, req = "key", key
					}
					_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
					if _, err = nc.Write([]byte(req)); err != nil {
						break
					}
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						if ctx.Err() == nil {
							e.tally.add(what + " " + failOf(err))
						}
						break
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					e.tally.add(fmt.Sprintf("%s %d", what, resp.StatusCode))
					if resp.Close {
						break
					}
				}
				nc.Close()
			}
		})
	}
	wg.Wait()
}
