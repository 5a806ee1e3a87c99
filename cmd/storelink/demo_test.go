package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// TestDemoNewcomer walks a newcomer's first minutes with serve --demo: it
// prints where the dashboard and the portal are and the listen command
// for the endpoint it registered at --demo-webhook-url; an order placed
// before listen runs fails its first two delivery attempts, and once
// listen runs the event is redelivered within a minute (the default
// schedule's third attempt would come 5 minutes later).
func TestDemoNewcomer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there until the newcomer starts listen
	p := startServe(t, t.TempDir(), "--demo", "--demo-webhook-url", "http://"+addr+"/hooks")
	for _, want := range []string{
		"webhook_url:    http://" + addr + "/hooks\n",
		"storelink listen --addr " + addr + " --secret " + p.WebhookSecret + "\n",
		"storelink: the operator's dashboard: " + p.URL + "/ ",
		"storelink: the partner portal: " + p.URL + "/portal/ ",
	} {
		// The lines after "listening on" are read after startServe returns.
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(p.stdout.String(), want); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("serve --demo printed:\n%s\nwant it to say %q", p.stdout, want)
			}
		}
	}

	p.waitUpload(t, mustUpload(t, p, "stock.csv", []byte("store;ean;article_number;quantity;price\nS1;4006381333931;SKU-1;5;19.99\n")), 30*time.Second)
	secretOrder(t, p, "NEWCOMER-1")
	var failed secretDelivery
	waitUntil(t, 30*time.Second, "two failed attempts", func() bool {
		ds := secretDeliveries(t, p)
		if len(ds) == 1 && len(ds[0].Attempts) >= 2 {
			failed = ds[0]
			return true
		}
		return false
	})
	if failed.State != "pending" || failed.Attempts[0].Error == "" || failed.Attempts[1].Error == "" {
		t.Fatalf("delivery with nothing listening = %+v, want pending after failed attempts", failed)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"listen", "--addr", addr, "--secret", p.WebhookSecret}, noEnv, nil, &out, &out)
	}()
	defer func() { cancel(); <-done }()
	start := time.Now()
	waitUntil(t, time.Minute, "redelivered within a minute of listen's start", func() bool {
		ds := secretDeliveries(t, p)
		return len(ds) == 1 && ds[0].State == "succeeded"
	})
	waitUntil(t, 5*time.Second, "shown by listen", func() bool { return strings.Contains(out.String(), "NEWCOMER-1") })
	t.Logf("redelivered %s after listen started", time.Since(start).Round(100*time.Millisecond))
}
