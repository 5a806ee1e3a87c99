package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// semicolonGzip is one line of ';' of almost 10 MiB (under serve's default
// --max-file-size), gzipped: about 10 KB.
var semicolonGzip = sync.OnceValue(func() []byte {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	line := bytes.Repeat([]byte{';'}, 64<<10)
	for range 159 { // 159 × 64 KiB = 10 MiB − 64 KiB
		zw.Write(line)
	}
	zw.Write([]byte{'\n'})
	zw.Close()
	return b.Bytes()
})

// putGzip sends body as a gzip-encoded stock file to path with c's key.
func putGzip(ctx context.Context, hc *http.Client, base, path string, c client, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "PUT", base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("x-api-key", c.key)
	req.Header.Set("Content-Type", "text/csv")
	req.Header.Set("Content-Encoding", "gzip")
	resp, err := hc.Do(req)
	if err == nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
	}
	return resp, err
}

// csvValidate keeps 3 validations of the semicolon line in flight, from
// three of the attacker's clients.
func csvValidate(ctx context.Context, e *env) {
	hc := attackerHTTP(time.Minute, 4)
	defer hc.CloseIdleConnections()
	var wg sync.WaitGroup
	for i := range 3 {
		c := e.acc.attacker[i]
		wg.Go(func() {
			for ctx.Err() == nil {
				resp, err := putGzip(ctx, hc, e.base, "/stock/"+c.id+"/validate", c, semicolonGzip())
				e.tally.answer(ctx, "validate", resp, err)
				if err != nil && !pace(ctx, 100*time.Millisecond) {
					return
				}
			}
		})
	}
	wg.Wait()
}

// csvUpload uploads the semicolon line once from each attacker client, then
// waits while serve processes them.
func csvUpload(ctx context.Context, e *env) {
	hc := attackerHTTP(time.Minute, attackerClients)
	defer hc.CloseIdleConnections()
	var wg sync.WaitGroup
	for i, c := range e.acc.attacker {
		wg.Go(func() {
			resp, err := putGzip(ctx, hc, e.base, fmt.Sprintf("/stock/%s/line-%d.csv", c.id, i), c, semicolonGzip())
			e.tally.answer(ctx, "upload", resp, err)
		})
	}
	wg.Wait()
	<-ctx.Done()
}

// badRowsGzip is a feed of almost 10 MiB whose every row fails the check
// (an EAN that is no EAN), gzipped: each row is a line of the error file,
// with its problem, so the error file is larger than the feed.
var badRowsGzip = sync.OnceValue(func() []byte {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	zw.Write([]byte("store;ean;article_number;quantity;price;retail_price\n"))
	row := []byte("S1;not-an-ean;SKU;1;19.99;29.99\n")
	for n := len(row); n < 10<<20-64<<10; n += len(row) {
		zw.Write(row)
	}
	zw.Close()
	return b.Bytes()
})

// csvErrors sends the feed of bad rows as an upload, once from each of the
// attacker's clients, then waits while serve processes them.
func csvErrors(ctx context.Context, e *env) {
	hc := attackerHTTP(time.Minute, attackerClients)
	defer hc.CloseIdleConnections()
	var wg sync.WaitGroup
	for i, c := range e.acc.attacker {
		wg.Go(func() {
			resp, err := putGzip(ctx, hc, e.base, fmt.Sprintf("/stock/%s/bad-%d.csv", c.id, i), c, badRowsGzip())
			e.tally.answer(ctx, "upload", resp, err)
		})
	}
	wg.Wait()
	<-ctx.Done()
}

// jsonDepth keeps 20 webhook tests with a body of 1 MiB of '[' in flight,
// to an endpoint id that does not exist.
func jsonDepth(ctx context.Context, e *env) {
	body := bytes.Repeat([]byte{'['}, 1<<20)
	hc := attackerHTTP(time.Minute, 20)
	defer hc.CloseIdleConnections()
	var wg sync.WaitGroup
	for i := range 20 {
		c := e.acc.attacker[i%len(e.acc.attacker)]
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, "POST", e.base+"/webhooks/"+c.id+"/endpoints/"+randomUUID()+"/test", bytes.NewReader(body))
				req.Header.Set("x-api-key", c.key)
				req.Header.Set("Content-Type", "application/json")
				resp, err := hc.Do(req)
				if err == nil {
					io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
					resp.Body.Close()
				}
				e.tally.answer(ctx, "test", resp, err)
				if err != nil && !pace(ctx, 100*time.Millisecond) {
					return
				}
			}
		})
	}
	wg.Wait()
}

// randomUUID is a version 4 UUID.
func randomUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// tinyUploads sends up to 2,000 one-byte uploads, 8 at a time over the
// attacker's clients, as fast as serve takes them, then waits while serve
// works through them.
func tinyUploads(ctx context.Context, e *env) {
	const total = 2000
	hc := attackerHTTP(30*time.Second, 8)
	defer hc.CloseIdleConnections()
	var n atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := n.Add(1)
				if i > total {
					return
				}
				c := e.acc.attacker[(int(i)+w)%len(e.acc.attacker)]
				req, _ := http.NewRequestWithContext(ctx, "PUT", fmt.Sprintf("%s/stock/%s/tiny-%d.csv", e.base, c.id, i), bytes.NewReader([]byte{'x'}))
				req.Header.Set("x-api-key", c.key)
				req.Header.Set("Content-Type", "text/csv")
				resp, err := hc.Do(req)
				if err == nil {
					io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
					resp.Body.Close()
				}
				e.tally.answer(ctx, "upload", resp, err)
			}
		})
	}
	wg.Wait()
	<-ctx.Done()
}

// poolHogPrepare uploads a file of almost 8 MiB from two attacker clients,
// whose downloads the attack then holds, and waits until both are applied:
// applying one holds SQLite's write lock for about a second, which is
// ordinary work of the attacker's, not the attack.
func poolHogPrepare(ctx context.Context, e *env) error {
	var b bytes.Buffer
	b.WriteString("store;ean;article_number;quantity;price\n")
	for i := 0; b.Len() < 8<<20-64; i++ {
		fmt.Fprintf(&b, "S1;%s;SKU-%d;1;1.00\n", ean13(400000000000+int64(i)), i)
	}
	hc := attackerHTTP(time.Minute, 2)
	defer hc.CloseIdleConnections()
	for i := range 2 {
		c := e.acc.attacker[len(e.acc.attacker)-1-i]
		req, _ := http.NewRequestWithContext(ctx, "PUT", fmt.Sprintf("%s/stock/%s/big-%d.csv", e.base, c.id, i), bytes.NewReader(b.Bytes()))
		req.Header.Set("x-api-key", c.key)
		req.Header.Set("Content-Type", "text/csv")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		var u struct {
			ID string `json:"upload_id"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &u) != nil || u.ID == "" {
			return fmt.Errorf("upload of the file to download: %d %s", resp.StatusCode, body)
		}
		e.files = append(e.files, attackFile{c: c, id: u.ID})
	}
	for _, f := range e.files {
		if err := waitProcessed(ctx, hc, e.base, f); err != nil {
			return err
		}
	}
	return nil
}

// waitProcessed polls an upload's status until it is no longer waiting or
// being processed, for at most a minute.
func waitProcessed(ctx context.Context, hc *http.Client, base string, f attackFile) error {
	deadline := time.Now().Add(time.Minute)
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/stock/"+f.c.id+"/uploads/"+f.id, nil)
		req.Header.Set("x-api-key", f.c.key)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		var u struct {
			Status string `json:"status"`
		}
		err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&u)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("status of the file to download: %w", err)
		}
		if u.Status != "accepted" && u.Status != "processing" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the file to download is still %s after a minute", u.Status)
		}
		if !pace(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
}
