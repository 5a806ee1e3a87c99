package main

// The webhook benchmark of issue 15, item 4: webhooks as they are. A
// separate `storelink serve` delivers order events to 1,000 endpoints, one
// per client, each on an address of its own (127.0.x.y, bound one by one,
// never 0.0.0.0), all served by one receiver in this process: it answers
// 200 50 ms after a request came in, but for every 50th endpoint (2%),
// which hangs, answering nothing until serve gives up at its
// --webhook-timeout (10 s, the default) and closes the connection. Events
// are made the way partners' orders make them, by order calls over HTTP:
// create with three items, fulfil, return each item, five events an order.
// Run it with bench/webhook-endpoints, or
//
//	go test ./cmd/storelink -run '^$' -bench '^BenchmarkWebhookEndpoints$' -benchtime 1x
//
// Each of the N runs has two parts.
//
// Backlog: 10 orders a client, 50,000 events over 10,000 orders, are made
// while every endpoint holds its requests (a serve with a 10-minute timeout
// builds them and is then killed: the attempts it had in flight were never
// answered, and go again as the same attempts after the restart, as after
// any crash). A serve with the settings measured (the default timeout and
// concurrency) then starts on that database and delivers the backlog. The
// figure: healthy endpoints' events (49,000) divided by the time from its
// start to the last one's 200, against the bound its concurrency allows,
// worker.DefaultWorkers attempts in flight ÷ 50 ms (target ≥ 0.8 of it).
// Serve's CPU meanwhile, per event delivered, is printed beside the CPU per
// request of a bare net/http client (a process of its own, as serve is)
// posting the same bodies with the same headers to the same endpoints from
// as many goroutines as serve has attempts in flight, in the same run
// (target ≤ 2×). Then the hanging endpoints come back and every event of
// theirs must arrive too.
//
// Steady: events are made at epSteadyRate a second for epSteadyFor while
// the 2% hang again; for each event to a healthy endpoint, the time from
// its commit (the event's timestamp, taken when its transaction began, on
// the same clock) to the endpoint's 200 (target p99 < 1 s). Then the
// hanging endpoints come back, and every event must arrive.
//
// After each part every event of every client's event feed must have
// arrived, and each order's events in order: every arrival of an event
// before the first of the next one. Otherwise the benchmark fails; it never
// fails on speed, printing MET or MISSED per target.

import (
	"bytes"
	"context"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"storelink"
	"storelink/worker"
)

const (
	epEndpoints   = 1000
	epHangEvery   = 50 // every 50th endpoint hangs: 2%
	epOrders      = 10 // per client and run
	epItems       = 3  // per order: create, fulfil and a return per item
	epPerOrder    = 2 + epItems
	epAnswerAfter = 50 * time.Millisecond
	epTimeout     = 10 * time.Second // serve's default --webhook-timeout
	epCallers     = 32               // order calls at once
	epSteadyRate  = 1000             // events/s
	epSteadyFor   = 20 * time.Second
	epArriveIn    = 3 * time.Minute // for every event to arrive, hanging ones included

	epTargetShare = 0.8
	epTargetP99   = time.Second
	epTargetCPU   = 2.0
)

// epRetry is serve's retry schedule: a try every 5 s, so that the hanging
// endpoints' events go out soon after they come back.
var epRetry = strings.TrimSuffix(strings.Repeat("5s,", 30), ",")

// BenchmarkWebhookEndpoints is the benchmark of issue 15, item 4; see the
// top of the file.
func BenchmarkWebhookEndpoints(b *testing.B) {
	needFiles(b, 4*epEndpoints+2*worker.DefaultWorkers+1024)
	rc := newEPReceiver(b, epEndpoints, epHangEvery)
	data := b.TempDir()
	fig := epFigures{loadBefore: loadAverage()}
	builder := startServe(b, data, "--webhook-allow-private", "--webhook-timeout", "10m")
	urls := make([][]string, epEndpoints)
	for i := range urls {
		urls[i] = []string{rc.urls[i]}
	}
	clients := epSetup(b, builder, urls)
	for b.Loop() {
		b.StopTimer()
		// The backlog, built while every endpoint holds its requests.
		rc.phase(epHold)
		if builder == nil {
			builder = startServe(b, data, "--webhook-allow-private", "--webhook-timeout", "10m")
		}
		start := time.Now()
		calls := epDrive(b, builder, clients, epEndpoints*epOrders, 0, 0)
		fig.build = time.Since(start)
		builder.Kill()
		builder = nil
		rc.waitHeld(b, 0)
		b.StartTimer()

		// Delivered by a serve with the settings measured.
		rc.phase(epHang)
		healthy := epHealthy(calls)
		t0 := time.Now()
		p, pid, stop := epServe(b, data, "--webhook-allow-private", "--webhook-timeout", epTimeout.String(), "--webhook-retry-schedule", epRetry)
		up := time.Since(t0)
		cpu0, busy0, conns0 := cpuTime(b, pid), machineCPU(b), rc.conns.Load()
		stopProfile := epProfile(b)
		rc.waitHealthy(b, p, healthy)
		stopProfile()
		cpu, busy := cpuTime(b, pid)-cpu0, machineCPU(b)-busy0
		got := rc.snapshot()
		last := lastHealthy(got, rc)
		drain := last.Sub(t0)
		b.Logf("serve listened %d ms after its start, opened %d connections to the endpoints; %s",
			up.Milliseconds(), rc.conns.Load()-conns0, epTimeline(got, rc, t0))
		run := epRun{rate: float64(healthy) / drain.Seconds(), drain: drain, cpu: cpu / time.Duration(healthy),
			hung: rc.hangs.Load(), busy: busy.Seconds() / (drain.Seconds() * float64(runtime.NumCPU())),
			serveBusy: cpu.Seconds() / (drain.Seconds() * float64(runtime.NumCPU()))}
		rc.hangOn.Store(false)
		b.StopTimer()
		all := rc.waitAll(b, p, len(calls))
		run.duplicates += epCheck(b, p, clients, all, rc.hits())

		// The bare client: the same requests, in the order serve made them.
		run.bareRate, run.bareCPU = epBare(b, rc, all)

		// Steady: events at epSteadyRate a second while the 2% hang.
		rc.phase(epHang)
		timeouts0 := epMetric(b, p, `storelink_webhook_attempts_total{outcome="retry"}`)
		start = time.Now()
		calls = epDrive(b, p, clients, 0, epSteadyRate, epSteadyFor)
		run.steadyRate = float64(len(calls)) / time.Since(start).Seconds()
		rc.waitHealthy(b, p, epHealthy(calls))
		run.timeouts = epMetric(b, p, `storelink_webhook_attempts_total{outcome="retry"}`) - timeouts0
		rc.hangOn.Store(false)
		all = rc.waitAll(b, p, len(calls))
		run.duplicates += epCheck(b, p, clients, all, rc.hits())
		for _, a := range all {
			if !rc.hanging[a.endpoint] {
				run.lat = append(run.lat, a.first.Sub(a.ts))
			}
		}
		run.rss = procStatus(b, pid, "VmHWM")
		b.Logf("run %d: backlog built in %.1f s; %d healthy events delivered in %.2f s: %.0f events/s (bound %.0f, %.2f of it); serve CPU %.3f ms an event, bare client %.3f ms a request (%.0f req/s); the cores %.0f%% busy, serve %.0f%% | steady %.0f events/s: commit to 200 p50 %.1f ms, p99 %.1f ms, max %.1f ms, %.0f attempts timed out",
			len(fig.runs)+1, fig.build.Seconds(), healthy, drain.Seconds(), run.rate, epBound(), run.rate/epBound(), ms(run.cpu), ms(run.bareCPU), run.bareRate,
			100*run.busy, 100*run.serveBusy, run.steadyRate, ms(pct(run.lat, 50)), ms(pct(run.lat, 99)), ms(pct(run.lat, 100)), run.timeouts)
		fig.runs = append(fig.runs, run)
		stop()
		b.StartTimer()
	}
	fig.loadAfter = loadAverage()
	printEndpoints(b, fig)
}

// epServe starts the serve measured: a process of its own, or with
// STORELINK_BENCH_ENDPOINTS_PROFILE set, this process (for a CPU profile of
// the backlog's delivery into that file; the receiver and serve then share
// the process and its CPU figures, and there is one run). It returns the
// process whose CPU is counted, and how to stop serve.
func epServe(b *testing.B, data string, args ...string) (*proc, int, func()) {
	b.Helper()
	if os.Getenv(epProfileEnv) == "" {
		p := startServe(b, data, args...)
		return p, p.PID(), p.Kill
	}
	if b.N > 1 {
		b.Fatalf("%s profiles one run: -benchtime 1x", epProfileEnv)
	}
	return runServeInProcess(b, data, args...), os.Getpid(), func() {}
}

const epProfileEnv = "STORELINK_BENCH_ENDPOINTS_PROFILE"

// epProfile starts the CPU profile of epServe, if asked for, and returns
// the function that ends it.
func epProfile(b *testing.B) func() {
	b.Helper()
	path := os.Getenv(epProfileEnv)
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// epTimeline says how the healthy endpoints' events arrived after t0:
// the first, and how many in each second.
func epTimeline(got map[string]*epArrival, rc *epReceiver, t0 time.Time) string {
	var first time.Time
	var per []int
	for _, a := range got {
		if rc.hanging[a.endpoint] {
			continue
		}
		if first.IsZero() || a.first.Before(first) {
			first = a.first
		}
		i := int(a.first.Sub(t0) / time.Second)
		for len(per) <= i {
			per = append(per, 0)
		}
		per[i]++
	}
	return fmt.Sprintf("the first 200 after %d ms; 200s each second: %v", first.Sub(t0).Milliseconds(), per)
}

// needFiles makes sure this process may open n files, raising its soft
// limit if need be (Go raises it to the hard limit at start already).
func needFiles(b *testing.B, n uint64) {
	b.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
	if lim.Cur < n && lim.Max >= n {
		lim.Cur = n
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			b.Fatal(err)
		}
	}
	if lim.Cur < n {
		b.Skipf("needs %d open files; the limit is %d (hard %d)", n, lim.Cur, lim.Max)
	}
}

// epBound is the delivery rate serve's concurrency allows: every attempt
// slot busy with a 50 ms answer.
func epBound() float64 { return float64(worker.DefaultWorkers) / epAnswerAfter.Seconds() }

// Receiver modes.
const (
	epHold = iota // every endpoint holds every request until the client goes
	epHang        // the hanging endpoints hold theirs while hangOn
)

// epReceiver is the 1,000 endpoints: one HTTP server on a listener per
// address. It notes for each webhook-id when it answered and with what,
// and answers 200 epAnswerAfter after the request's body came in.
type epReceiver struct {
	srv *http.Server
	// answerAfter is how long after a request's body came in it is
	// answered (epAnswerAfter unless set otherwise).
	answerAfter time.Duration
	urls        []string
	hanging     []bool
	mode        atomic.Int32
	hangOn      atomic.Bool
	held        atomic.Int32 // requests held now
	conns       atomic.Int64 // connections accepted
	hangs       atomic.Int64 // requests held by hanging endpoints in this phase

	mu   sync.Mutex
	got  map[string]*epArrival
	nhit int
	// distinct and healthy count got's ids, and those at healthy endpoints.
	distinct, healthy int
}

// epArrival is one webhook-id as the receiver saw it.
type epArrival struct {
	first, last time.Time // the 200s written
	ts          time.Time // the event's timestamp: its commit
	endpoint    int
	body        []byte
	header      http.Header
	n           int
}

type epConnKey struct{}

// newEPReceiver listens for n endpoints, every hangEvery-th of which hangs
// (none for 0).
func newEPReceiver(b *testing.B, n, hangEvery int) *epReceiver {
	b.Helper()
	rc := &epReceiver{got: map[string]*epArrival{}, hanging: make([]bool, n), answerAfter: epAnswerAfter}
	byAddr := map[string]int{}
	var lns []net.Listener
	for i := range n {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.%d.%d:0", 1+i/250, 1+i%250))
		if err != nil {
			b.Fatalf("listen on endpoint %d's address: %v", i, err)
		}
		lns = append(lns, ln)
		byAddr[ln.Addr().String()] = i
		rc.urls = append(rc.urls, "http://"+ln.Addr().String()+"/hook")
		rc.hanging[i] = hangEvery > 0 && i%hangEvery == hangEvery-1
	}
	rc.srv = &http.Server{Handler: rc, ReadHeaderTimeout: time.Minute,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			rc.conns.Add(1)
			return context.WithValue(ctx, epConnKey{}, byAddr[c.LocalAddr().String()])
		}}
	for _, ln := range lns {
		go rc.srv.Serve(ln)
	}
	b.Cleanup(func() { rc.srv.Close() })
	return rc
}

func (rc *epReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i := r.Context().Value(epConnKey{}).(int)
	body, err := io.ReadAll(r.Body)
	in := time.Now()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if rc.mode.Load() == epHold || rc.hanging[i] && rc.hangOn.Load() {
		rc.held.Add(1)
		if rc.mode.Load() == epHang {
			rc.hangs.Add(1)
		}
		select {
		case <-r.Context().Done(): // the client gave up
		case <-time.After(15 * time.Minute):
		}
		rc.held.Add(-1)
		return
	}
	var ev struct {
		Timestamp string `json:"timestamp"`
	}
	_ = json.Unmarshal(body, &ev)
	ts, _ := time.Parse(storelink.EventTimeLayout, ev.Timestamp)
	if rc.answerAfter > 0 {
		time.Sleep(time.Until(in.Add(rc.answerAfter))) // a receiver that answers late
	}
	id := r.Header.Get("webhook-id")
	now := time.Now()
	rc.mu.Lock()
	rc.nhit++
	if a := rc.got[id]; a != nil {
		a.n++
		a.last = now
	} else {
		rc.got[id] = &epArrival{first: now, last: now, ts: ts, endpoint: i, body: body, header: r.Header, n: 1}
		rc.distinct++
		if !rc.hanging[i] {
			rc.healthy++
		}
	}
	rc.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// phase forgets what arrived so far and sets the mode; the hanging
// endpoints hang from now on.
func (rc *epReceiver) phase(mode int32) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.got, rc.nhit, rc.distinct, rc.healthy = map[string]*epArrival{}, 0, 0, 0
	rc.hangs.Store(0)
	rc.mode.Store(mode)
	rc.hangOn.Store(true)
}

func (rc *epReceiver) hits() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.nhit
}

// snapshot is a copy of what arrived in this phase.
func (rc *epReceiver) snapshot() map[string]*epArrival {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := make(map[string]*epArrival, len(rc.got))
	for id, a := range rc.got {
		c := *a
		out[id] = &c
	}
	return out
}

// count is how many different webhook-ids arrived in this phase, and how
// many of them at healthy endpoints.
func (rc *epReceiver) count() (all, healthy int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.distinct, rc.healthy
}

// waitHeld waits until n requests are held.
func (rc *epReceiver) waitHeld(b *testing.B, n int32) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for rc.held.Load() != n {
		if time.Now().After(deadline) {
			b.Fatalf("%d requests held, want %d", rc.held.Load(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitHealthy waits until n events arrived at healthy endpoints.
func (rc *epReceiver) waitHealthy(b *testing.B, p *proc, n int) {
	b.Helper()
	rc.waitFor(b, p, func() bool { _, h := rc.count(); return h >= n }, fmt.Sprintf("%d events at healthy endpoints", n))
}

// waitAll waits until n events arrived and returns them.
func (rc *epReceiver) waitAll(b *testing.B, p *proc, n int) map[string]*epArrival {
	b.Helper()
	rc.waitFor(b, p, func() bool { a, _ := rc.count(); return a >= n }, fmt.Sprintf("all %d events", n))
	return rc.snapshot()
}

func (rc *epReceiver) waitFor(b *testing.B, p *proc, done func() bool, what string) {
	b.Helper()
	deadline := time.Now().Add(epArriveIn)
	for !done() {
		if time.Now().After(deadline) {
			a, h := rc.count()
			log := ""
			if p != nil {
				log = tail(p.stderr.String(), 3000)
			}
			b.Fatalf("waiting for %s: %d arrived (%d at healthy endpoints) within %s\nserver log:\n%s", what, a, h, epArriveIn, log)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func lastHealthy(got map[string]*epArrival, rc *epReceiver) time.Time {
	var last time.Time
	for _, a := range got {
		if !rc.hanging[a.endpoint] && a.first.After(last) {
			last = a.first
		}
	}
	return last
}

// epClient is a client with its one endpoint, number i.
type epClient struct {
	id, key string
	i       int
	cursor  string // its event feed read up to here
}

// epCall is an order call that committed an event.
type epCall struct{ client int }

// epHealthy is how many of calls' events go to healthy endpoints.
func epHealthy(calls []epCall) int {
	n := 0
	for _, c := range calls {
		if c.client%epHangEvery != epHangEvery-1 {
			n++
		}
	}
	return n
}

var epEANs = [epItems]string{ean13(7100), ean13(7101), ean13(7102)}

// epHTTP is the benchmark's client of serve's API.
var epHTTP = &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 2 * epCallers, IdleConnTimeout: time.Minute}}

// epDo makes an API call (admin token, or key when set) and decodes a JSON
// answer into v; any status but want fails.
func epDo(p *proc, method, path, key string, body []byte, want int, v any) error {
	req, err := http.NewRequest(method, p.URL+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if key != "" {
		req.Header.Set("x-api-key", key)
		req.Header.Set("Content-Type", "application/csv")
	} else {
		req.Header.Set("Authorization", "Bearer "+p.AdminToken)
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := epHTTP.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d %v %s", method, path, resp.StatusCode, err, answer)
	}
	if v != nil {
		if err := json.Unmarshal(answer, v); err != nil {
			return fmt.Errorf("%s %s: %w: %s", method, path, err, answer)
		}
	}
	return nil
}

// epParallel runs f(i) for i in [0, n) on epCallers goroutines, each until
// f returns an error: errStop ends it, any other fails the benchmark.
func epParallel(b *testing.B, p *proc, n int, f func(i int) error) {
	b.Helper()
	var next atomic.Int64
	var fails failure
	var wg sync.WaitGroup
	for range epCallers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := f(i); err != nil {
					if err != errStop {
						fails.add("%v", err)
					}
					return
				}
			}
		})
	}
	wg.Wait()
	if fails.n > 0 {
		b.Fatalf("%d calls failed; the first:\n%s\nserver log:\n%s", fails.n, strings.Join(fails.first, "\n"), tail(p.stderr.String(), 2000))
	}
}

// epSetup makes a partner and client for each list of endpoint URLs, with
// store S01, stock of the three articles there, and those endpoints.
func epSetup(b *testing.B, p *proc, urls [][]string) []*epClient {
	b.Helper()
	var feed strings.Builder
	feed.WriteString("store;ean;article_number;quantity;price\n")
	for i, ean := range epEANs {
		fmt.Fprintf(&feed, "S01;%s;ART-%d;1000000;%d.99\n", ean, i, 10+i)
	}
	clients := make([]*epClient, len(urls))
	epParallel(b, p, len(urls), func(i int) error {
		var partner struct {
			ID string `json:"partner_id"`
		}
		var cl struct {
			ID     string `json:"client_id"`
			APIKey string `json:"api_key"`
		}
		if err := epDo(p, "POST", "/admin/partners", "", fmt.Appendf(nil, `{"name":"Endpoint Partner %d"}`, i), 201, &partner); err != nil {
			return err
		}
		if err := epDo(p, "POST", "/admin/partners/"+partner.ID+"/clients", "", []byte(`{"country_code":"DE","currency":"EUR"}`), 201, &cl); err != nil {
			return err
		}
		if err := epDo(p, "PUT", "/admin/clients/"+cl.ID+"/stores/S01", "", []byte(`{"name":"Store 01"}`), 201, nil); err != nil {
			return err
		}
		for _, u := range urls[i] {
			if err := epDo(p, "POST", "/admin/clients/"+cl.ID+"/webhooks", "", fmt.Appendf(nil, `{"url":%q}`, u), 201, nil); err != nil {
				return err
			}
		}
		if err := epDo(p, "PUT", "/stock/"+cl.ID+"/stock.csv", cl.APIKey, []byte(feed.String()), 200, nil); err != nil {
			return err
		}
		clients[i] = &epClient{id: cl.ID, key: cl.APIKey, i: i}
		return nil
	})
	deadline := time.Now().Add(2 * time.Minute)
	for epMetric(b, p, `storelink_uploads_processed_total{status="applied"}`) < float64(len(urls)) {
		if time.Now().After(deadline) {
			b.Fatalf("the %d stock uploads were not applied within 2 minutes", len(urls))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return clients
}

// epMetric reads one of serve's metrics (0 when absent).
func epMetric(b *testing.B, p *proc, name string) float64 {
	b.Helper()
	resp, err := p.getMetrics(epHTTP)
	if err != nil {
		b.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

var epOrderNumber atomic.Int64

// epOrder drives one order of client c through its five calls, each after
// pace returns; it returns the calls made.
func epOrder(p *proc, c int, clients []*epClient, pace func() bool) ([]epCall, error) {
	var calls []epCall
	var o benchOrder
	n := epOrderNumber.Add(1)
	for step := range epPerOrder {
		if !pace() {
			break
		}
		var path string
		var body []byte
		want := http.StatusOK
		switch step {
		case 0:
			var buf bytes.Buffer
			fmt.Fprintf(&buf, `{"order_number":"EP-%08d","client_id":%q,"items":[`, n, clients[c].id)
			for i, ean := range epEANs {
				if i > 0 {
					buf.WriteByte(',')
				}
				fmt.Fprintf(&buf, `{"ean":%q,"marketplace_article_number":"MP-%s"}`, ean, ean)
			}
			buf.WriteString(`],"customer_billing_address":{"first_name":"Erika","last_name":"Mustermann",` +
				`"address_line_1":"Heidestraße 17","zip_code":"51147","city":"Köln","country_code":"DE"}}`)
			path, body, want = "/orders", buf.Bytes(), http.StatusCreated
		case 1:
			path, body = "/orders/"+o.ID+"/fulfil", []byte(`{}`)
		default:
			path = "/orders/" + o.ID + "/returns"
			body = fmt.Appendf(nil, `{"items":[{"item_id":%q,"return_reason_code":2,"return_location":"STORE"}]}`, o.Items[step-2].ItemID)
		}
		var got benchOrder
		if err := epDo(p, http.MethodPost, path, "", body, want, &got); err != nil {
			return calls, err
		}
		if step == 0 {
			if len(got.Items) != epItems {
				return calls, fmt.Errorf("order %s has %d items, want %d", got.ID, len(got.Items), epItems)
			}
			o = got
		}
		calls = append(calls, epCall{client: c})
	}
	return calls, nil
}

// epDrive makes order calls: with rate 0, orders orders as fast as
// epCallers callers go, the k-th for client k mod their number; otherwise one call
// every 1/rate for d, the callers each driving an order at a time (for the
// next client in turn), a call late rather than skipped when its caller
// was busy at its tick.
func epDrive(b *testing.B, p *proc, clients []*epClient, orders, rate int, d time.Duration) []epCall {
	b.Helper()
	var mu sync.Mutex
	var calls []epCall
	var next atomic.Int64
	pace := func() bool { return true }
	if rate > 0 {
		n := int(d.Seconds() * float64(rate))
		ticks := make(chan struct{}, n)
		go func() {
			start, every := time.Now(), time.Second/time.Duration(rate)
			for i := range n {
				time.Sleep(time.Until(start.Add(time.Duration(i) * every))) // the offered load's pace
				ticks <- struct{}{}
			}
			close(ticks)
		}()
		pace = func() bool { _, ok := <-ticks; return ok }
		orders = n // more than enough: the ticks end it
	}
	epParallel(b, p, orders, func(int) error {
		k := int(next.Add(1) - 1)
		made, err := epOrder(p, k%len(clients), clients, pace)
		mu.Lock()
		calls = append(calls, made...)
		mu.Unlock()
		if err == nil && len(made) < epPerOrder {
			return errStop // the ticks are over
		}
		return err
	})
	return calls
}

// errStop ends one of epParallel's goroutines without a failure.
var errStop = errors.New("stop")

// epEvents reads client c's events committed since the last call.
func epEvents(p *proc, c *epClient) ([]whEvent, error) {
	var out []whEvent
	for {
		path := "/events/" + c.id + "?limit=1000"
		if c.cursor != "" {
			path += "&after=" + url.QueryEscape(c.cursor)
		}
		var page struct {
			Events     []whEvent `json:"events"`
			NextCursor string    `json:"next_cursor"`
		}
		if err := epDo(p, http.MethodGet, path, c.key, nil, http.StatusOK, &page); err != nil {
			return nil, err
		}
		out = append(out, page.Events...)
		if page.NextCursor != "" {
			c.cursor = page.NextCursor
		}
		if len(page.Events) < 1000 {
			return out, nil
		}
	}
}

// epCheck reads every client's events committed since the last check and
// checks that each arrived, at its client's endpoint, and each order's in
// order: every arrival of an event before the first of the order's next.
// It returns the number of duplicates.
func epCheck(b *testing.B, p *proc, clients []*epClient, got map[string]*epArrival, hits int) int {
	b.Helper()
	var mu sync.Mutex
	events := 0
	epParallel(b, p, len(clients), func(i int) error {
		c := clients[i]
		list, err := epEvents(p, c)
		if err != nil {
			return err
		}
		last := map[string]*epArrival{} // order → the arrival of its latest event
		for _, e := range list {
			a := got[e.EventID]
			switch {
			case a == nil:
				return fmt.Errorf("client %d: event %s (order %s, %s) never arrived", i, e.EventID, e.OrderID, e.State)
			case a.endpoint != c.i:
				return fmt.Errorf("client %d: event %s arrived at endpoint %d", i, e.EventID, a.endpoint)
			}
			if prev := last[e.OrderID]; prev != nil && !a.first.After(prev.last) {
				return fmt.Errorf("client %d, order %s: event %s (%s) answered at %s, not after the order's earlier event (last at %s)",
					i, e.OrderID, e.EventID, e.State, a.first.Format(time.RFC3339Nano), prev.last.Format(time.RFC3339Nano))
			}
			last[e.OrderID] = a
		}
		mu.Lock()
		events += len(list)
		mu.Unlock()
		return nil
	})
	if len(got) != events {
		b.Fatalf("%d different webhook-ids arrived for %d events", len(got), events)
	}
	return hits - len(got)
}

// The bare client: this test binary run again with epBareEnv naming a
// spec, which it posts and exits.
const epBareEnv = "STORELINK_BENCH_ENDPOINTS_BARE"

type epBareSpec struct {
	Workers  int
	Requests []epBareRequest
}

type epBareRequest struct {
	URL    string
	Body   []byte
	Header http.Header
}

// epBare posts the healthy endpoints' events, as serve sent them and in
// the order they arrived, from a process of its own with as many
// goroutines as serve has attempts in flight, and returns its requests per
// second (its first request to the last 200) and its CPU per request
// (getrusage around the posting alone).
func epBare(b *testing.B, rc *epReceiver, all map[string]*epArrival) (float64, time.Duration) {
	b.Helper()
	var list []*epArrival
	for _, a := range all {
		if !rc.hanging[a.endpoint] {
			list = append(list, a)
		}
	}
	slices.SortFunc(list, func(x, y *epArrival) int { return x.first.Compare(y.first) })
	spec := epBareSpec{Workers: worker.DefaultWorkers}
	for _, a := range list {
		spec.Requests = append(spec.Requests, epBareRequest{URL: rc.urls[a.endpoint], Body: a.body, Header: a.header})
	}
	path := b.TempDir() + "/bare.gob"
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := gob.NewEncoder(f).Encode(spec); err != nil {
		b.Fatal(err)
	}
	f.Close()
	rc.phase(epHang)
	rc.hangOn.Store(false)
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), epBareEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("bare client process: %v\n%s", err, out)
	}
	var startNS, cpuNS int64
	if _, err := fmt.Sscan(string(out), &startNS, &cpuNS); err != nil {
		b.Fatalf("bare client process printed %q", out)
	}
	got := rc.waitAll(b, nil, len(list))
	var last time.Time
	for _, a := range got {
		if a.first.After(last) {
			last = a.first
		}
	}
	return float64(len(list)) / last.Sub(time.Unix(0, startNS)).Seconds(), time.Duration(cpuNS) / time.Duration(len(list))
}

// runEPBare is the bare client process: it posts the spec in path through
// one net/http client and prints when it sent the first request and the
// CPU time the posting took, in nanoseconds.
func runEPBare(path string) int {
	f, err := os.Open(path)
	var spec epBareSpec
	if err == nil {
		err = gob.NewDecoder(f).Decode(&spec)
		f.Close()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		MaxIdleConnsPerHost: spec.Workers, IdleConnTimeout: time.Minute}}
	defer client.CloseIdleConnections()
	cpu0 := processCPU()
	start := time.Now()
	var next atomic.Int64
	var fails failure
	var wg sync.WaitGroup
	for range spec.Workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(spec.Requests); i = int(next.Add(1) - 1) {
				r := &spec.Requests[i]
				req, err := http.NewRequest(http.MethodPost, r.URL, bytes.NewReader(r.Body))
				if err != nil {
					fails.add("%v", err)
					return
				}
				req.Header = r.Header.Clone()
				resp, err := client.Do(req)
				if err != nil {
					fails.add("%v", err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode/100 != 2 {
					fails.add("status %d", resp.StatusCode)
					return
				}
			}
		})
	}
	wg.Wait()
	cpu := processCPU() - cpu0
	if fails.n > 0 {
		fmt.Fprintf(os.Stderr, "%d bare requests failed; the first:\n%s\n", fails.n, strings.Join(fails.first, "\n"))
		return 1
	}
	fmt.Println(start.UnixNano(), cpu.Nanoseconds())
	return 0
}

// processCPU is the user and system time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// epRun is what one run measured.
type epRun struct {
	rate, bareRate  float64 // healthy events delivered a second; the bare client's requests
	drain           time.Duration
	cpu, bareCPU    time.Duration // serve's per event delivered; the bare client's per request
	busy, serveBusy float64       // the share of the cores busy while the backlog was delivered
	hung            int64         // requests the hanging endpoints held meanwhile
	steadyRate      float64
	timeouts        float64 // attempts that failed in the steady part (the hanging endpoints')
	lat             []time.Duration
	duplicates      int
	rss             float64
}

// epFigures is every run's.
type epFigures struct {
	runs                  []epRun
	build                 time.Duration
	loadBefore, loadAfter string
}

func printEndpoints(b *testing.B, fig epFigures) {
	if len(fig.runs) == 0 {
		return
	}
	med := func(f func(epRun) float64) float64 {
		v := make([]float64, len(fig.runs))
		for i, r := range fig.runs {
			v[i] = f(r)
		}
		return medianOf(v)
	}
	var lat []time.Duration
	dups := 0
	for _, r := range fig.runs {
		lat = append(lat, r.lat...)
		dups += r.duplicates
	}
	rate, bareRate := med(func(r epRun) float64 { return r.rate }), med(func(r epRun) float64 { return r.bareRate })
	share := med(func(r epRun) float64 { return r.rate / epBound() })
	cpu, bareCPU := med(func(r epRun) float64 { return ms(r.cpu) }), med(func(r epRun) float64 { return ms(r.bareCPU) })
	cpuRatio := med(func(r epRun) float64 { return float64(r.cpu) / float64(r.bareCPU) })
	p99 := pct(lat, 99)
	healthy := (epEndpoints - epEndpoints/epHangEvery) * epOrders * epPerOrder
	b.ReportMetric(rate, "events/s")
	b.ReportMetric(share, "of-bound")
	b.ReportMetric(cpuRatio, "cpu-ratio")
	b.ReportMetric(ms(p99), "ms-p99-steady")
	fmt.Println("--- webhooks as they are (issue 15, item 4) ---")
	fmt.Printf("%d endpoints on 127.0.x.y answering 200 after %s, %d of them (%d%%) hanging until serve's --webhook-timeout (%s); "+
		"serve's deliverer: %d attempts in flight, %d per endpoint at most; %d runs; machine load average before %s, after %s\n",
		epEndpoints, epAnswerAfter, epEndpoints/epHangEvery, 100/epHangEvery, epTimeout, worker.DefaultWorkers, worker.DefaultPerEndpoint,
		len(fig.runs), fig.loadBefore, fig.loadAfter)
	fmt.Printf("backlog of %d events (%d orders, %d events each) built in %.1f s (last run); the healthy endpoints' %d delivered in %.2f s (median)\n",
		epEndpoints*epOrders*epPerOrder, epEndpoints*epOrders, epPerOrder, fig.build.Seconds(), healthy,
		med(func(r epRun) float64 { return r.drain.Seconds() }))
	fmt.Printf("delivered by serve:    %7.0f events/s; the cores %.0f%% busy, serve %.0f%%; the hanging endpoints held %.0f requests\n",
		rate, 100*med(func(r epRun) float64 { return r.busy }), 100*med(func(r epRun) float64 { return r.serveBusy }),
		med(func(r epRun) float64 { return float64(r.hung) }))
	fmt.Printf("bound (%d in flight / %s): %7.0f events/s; delivered / bound %.3f; target >= %.1f: %s\n",
		worker.DefaultWorkers, epAnswerAfter, epBound(), share, epTargetShare, verdict(share >= epTargetShare))
	fmt.Printf("bare net/http client, a process of its own, %d goroutines, the same requests to the same endpoints: %7.0f req/s; delivered / bare %.3f (same run; what the machine allowed)\n",
		worker.DefaultWorkers, bareRate, med(func(r epRun) float64 { return r.rate / r.bareRate }))
	fmt.Printf("CPU: serve %.3f ms per event delivered, bare client %.3f ms per request; ratio %.2f; target <= %.0f: %s\n",
		cpu, bareCPU, cpuRatio, epTargetCPU, verdict(cpuRatio <= epTargetCPU))
	fmt.Printf("steady %d events/s for %s (order calls reached %.0f/s), the %d%% hanging (%.0f attempts timed out): healthy endpoints' commit to 200: p50 %.1f ms, p99 %.1f ms, max %.1f ms; target p99 < %s: %s\n",
		epSteadyRate, epSteadyFor, med(func(r epRun) float64 { return r.steadyRate }), 100/epHangEvery,
		med(func(r epRun) float64 { return r.timeouts }), ms(pct(lat, 50)), ms(p99), ms(pct(lat, 100)), epTargetP99, verdict(p99 < epTargetP99))
	fmt.Printf("every event arrived, each order's in order (every arrival of an event before the first of the next); %d duplicates; peak RSS of serve %.1f MiB\n",
		dups, med(func(r epRun) float64 { return r.rss }))
}
