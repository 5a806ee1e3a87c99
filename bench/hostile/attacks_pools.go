package main

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// poolHog is one partner taking the shared pools with many clients: 4
// validations per client (the per-client in-flight limit), a byte a second
// after a first part, that together fill serve's default upload memory
// (256 MiB): 25 declare --max-file-size and send two megabytes of it (past
// the megabyte after which serve gives a body's buffer its declared size),
// the others declare a little under a megabyte and send all but 100 bytes; and 8 downloads of its big
// files through a 4 KiB receive buffer, reading nothing.
func poolHog(ctx context.Context, e *env) {
	line := []byte("S1;4006381333931;SKU;1;1.00\n")
	head := []byte("store;ean;article_number;quantity;price\n")
	big := append(slices.Clone(head), bytes.Repeat(line, (2<<20)/len(line)+64)...)
	small := append(slices.Clone(head), bytes.Repeat(line, (1000<<10)/len(line))...)
	cs := newConns()
	defer cs.closeAll()
	var wg sync.WaitGroup
	for i, c := range e.acc.attacker {
		for j := range 4 {
			declared, prefix := 10<<20, big
			if i*4+j >= 25 {
				declared, prefix = len(small)+100, small
			}
			wg.Go(func() { slowValidation(ctx, e, cs, c, declared, prefix) })
		}
	}
	for i := range 8 {
		f := e.files[i%len(e.files)]
		wg.Go(func() { slowDownload(ctx, e, cs, f) })
	}
	wg.Wait()
}

// slowValidation holds one validation of c in flight until ctx ends,
// starting another when serve ends it.
func slowValidation(ctx context.Context, e *env, cs *conns, c client, declared int, prefix []byte) {
	head := fmt.Appendf(nil, "PUT /stock/%s/validate HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\nContent-Type: text/csv\r\nContent-Length: %d\r\n\r\n", c.id, e.addr, c.key, declared)
	for ctx.Err() == nil {
		nc, err := dialRaw(ctx, e.addr, nil, 0)
		if err != nil {
			if ctx.Err() == nil {
				e.tally.add("validation dial " + failOf(err))
			}
			pace(ctx, 500*time.Millisecond)
			continue
		}
		cs.add(nc)
		answered := make(chan string, 1)
		go func() {
			code, err := readStatus(nc, time.Hour)
			if err != nil {
				code = failOf(err)
			}
			answered <- code
		}()
		_ = nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		_, err = nc.Write(append(head, prefix...))
		code := ""
	trickle:
		for sent := 0; err == nil && sent < declared-len(prefix)-1; sent++ {
			select {
			case code = <-answered:
				break trickle
			case <-ctx.Done():
				break trickle
			case <-time.After(time.Second):
			}
			_ = nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
			_, err = nc.Write([]byte{'1'})
		}
		if code == "" && err != nil {
			select {
			case code = <-answered:
			case <-time.After(time.Second):
				code = "write " + failOf(err)
			}
		}
		cs.drop(nc)
		if ctx.Err() != nil && code == "" {
			e.tally.add("validation held to the end")
		}
		if ctx.Err() == nil {
			e.tally.add("validation " + code)
			pace(ctx, 500*time.Millisecond)
		}
	}
}

// slowDownload holds one download of f until ctx ends, reading nothing of
// it beyond its status line; when refused, it asks again half a second
// later.
func slowDownload(ctx context.Context, e *env, cs *conns, f attackFile) {
	req := fmt.Appendf(nil, "GET /stock/%s/uploads/%s/file HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\n\r\n", f.c.id, f.id, e.addr, f.c.key)
	for ctx.Err() == nil {
		nc, err := dialRaw(ctx, e.addr, nil, 4096)
		if err != nil {
			if ctx.Err() == nil {
				e.tally.add("download dial " + failOf(err))
			}
			pace(ctx, 500*time.Millisecond)
			continue
		}
		cs.add(nc)
		_ = nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
		code := ""
		if _, err = nc.Write(req); err == nil {
			code, err = readStatus(nc, 10*time.Second)
		}
		if ctx.Err() != nil {
			cs.drop(nc)
			return
		}
		if err != nil {
			code = failOf(err)
		}
		e.tally.add("download " + code)
		if code == "200" {
			<-ctx.Done() // hold it, reading nothing
			cs.drop(nc)
			return
		}
		cs.drop(nc)
		pace(ctx, 500*time.Millisecond)
	}
}
