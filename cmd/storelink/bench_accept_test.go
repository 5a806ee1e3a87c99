package main

// The benchmark of issue 28 item 2, accepting never waits for applying:
// while the 10 MiB feed of one client applies, the 200 of a 2-row upload of
// another client comes within 100 ms p99, and a DELETE of a waiting upload
// answers at once and cancels it. On a separate `storelink serve` (SQLite;
// PostgreSQL too when STORELINK_TEST_DATABASE_URL is set), each round:
//
//   - the baseline: acceptUploaders uploaders, each of a client of its own,
//     PUT 2-row feeds one after the other (acceptPause between) for
//     acceptBaseline, with no apply of a large file running;
//   - the load: the demo client PUTs the 10 MiB feed (a new variant each
//     round, so every round writes every row); once its status is
//     processing, the same uploaders PUT the same feeds until it is applied,
//     and a canceller PUTs a 2-row feed of the demo client (which waits
//     behind the 10 MiB one: a client's uploads apply in order) and DELETEs
//     it. Only requests sent while the 10 MiB feed was seen processing
//     count.
//
// It prints the PUT's latency (request to 200) p50 and p99 of both phases,
// the DELETE's p50 and p99 and how many DELETEs found the upload cancelled,
// and MET or MISSED: PUT p99 under load < 100 ms; every DELETE answers 200
// cancelled, p99 < 100 ms. Run it with
//
//	go test ./cmd/storelink -run '^$' -bench '^BenchmarkAcceptDuringApply$' -benchtime 3x
//
// (-bench 'BenchmarkAcceptDuringApply/postgres' for PostgreSQL alone).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"
)

const (
	acceptUploaders = 4
	acceptPause     = 10 * time.Millisecond
	acceptBaseline  = 2 * time.Second
	acceptTarget    = 100 * time.Millisecond
)

// acceptArgs lift the limits that would turn the uploads away: what is
// measured is how long an accepted one waits for its 200.
var acceptArgs = []string{"--capacity-base", "100GiB", "--capacity-min-upload", "1", "--max-waiting-uploads", "0"}

// BenchmarkAcceptDuringApply is the benchmark of issue 28 item 2; see the
// top of the file.
func BenchmarkAcceptDuringApply(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) {
		benchAcceptDuringApply(b, "SQLite", func(b *testing.B) *benchServer {
			return newBenchServer(b, startServe(b, b.TempDir(), append([]string{"--demo"}, acceptArgs...)...))
		})
	})
	b.Run("postgres", func(b *testing.B) {
		skipWithoutPostgres(b)
		benchAcceptDuringApply(b, "PostgreSQL", func(b *testing.B) *benchServer {
			dbURL, _ := pgSchemaURL(b)
			p := startServe(b, b.TempDir(), pgArgs(dbURL, append([]string{"--demo"}, acceptArgs...)...)...)
			p.AdminToken = pgTestToken
			return newBenchServer(b, p)
		})
	})
}

// acceptSamples is what a phase measured.
type acceptSamples struct {
	puts, deletes []time.Duration
	cancelled     int      // DELETEs that answered 200 with the upload cancelled
	refused       []string // the other DELETE answers
}

func (a *acceptSamples) add(o acceptSamples) {
	a.puts = append(a.puts, o.puts...)
	a.deletes = append(a.deletes, o.deletes...)
	a.cancelled += o.cancelled
	a.refused = append(a.refused, o.refused...)
}

// quantile is the q-quantile of d (nearest rank), 0 when d is empty.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s))*q+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func benchAcceptDuringApply(b *testing.B, name string, start func(*testing.B) *benchServer) {
	loadBefore := loadAverage()
	s := start(b)
	clients := smallClientsOf(b, s.proc, acceptUploaders)
	var base, loaded acceptSamples
	round := 0
	for b.Loop() {
		round++
		feed := benchFeed(benchFeedBytes, -1, uint64(round))
		rb := s.acceptPhase(b, clients, round, nil)
		rl, apply := s.acceptWhileApplying(b, clients, round, feed)
		base.add(rb)
		loaded.add(rl)
		fmt.Printf("round %d: %s, 10 MiB feed (%d rows) applied in %.0f ms; 2-row PUT p50/p99 %.1f/%.1f ms alone (%d), %.1f/%.1f ms while it applied (%d); DELETE of a waiting upload p50/p99 %.1f/%.1f ms, %d of %d cancelled; load average %s\n",
			round, name, len(feed.rows), ms(apply), ms(quantile(rb.puts, 0.5)), ms(quantile(rb.puts, 0.99)), len(rb.puts),
			ms(quantile(rl.puts, 0.5)), ms(quantile(rl.puts, 0.99)), len(rl.puts),
			ms(quantile(rl.deletes, 0.5)), ms(quantile(rl.deletes, 0.99)), rl.cancelled, len(rl.deletes), loadAverage())
	}
	p99, del99 := quantile(loaded.puts, 0.99), quantile(loaded.deletes, 0.99)
	b.ReportMetric(ms(p99), "ms-p99-during-apply")
	b.ReportMetric(ms(quantile(base.puts, 0.99)), "ms-p99-alone")
	fmt.Printf("--- accepting while a 10 MiB feed applies on %s (issue 28 item 2), %d rounds; load average before %s, after %s ---\n",
		name, round, loadBefore, loadAverage())
	fmt.Printf("2-row PUT, no apply running (the baseline): p50 %6.1f ms, p99 %6.1f ms (%d PUTs)\n",
		ms(quantile(base.puts, 0.5)), ms(quantile(base.puts, 0.99)), len(base.puts))
	fmt.Printf("2-row PUT while the 10 MiB feed applies:    p50 %6.1f ms, p99 %6.1f ms (%d PUTs); p99 / baseline p99 %.1f; target p99 < %d ms: %s\n",
		ms(quantile(loaded.puts, 0.5)), ms(p99), len(loaded.puts), ms(p99)/max(ms(quantile(base.puts, 0.99)), 0.001),
		acceptTarget.Milliseconds(), verdict(len(loaded.puts) > 0 && p99 < acceptTarget))
	fmt.Printf("DELETE of a waiting upload while it applies: p50 %6.1f ms, p99 %6.1f ms; %d of %d cancelled; target every one cancelled, p99 < %d ms: %s\n",
		ms(quantile(loaded.deletes, 0.5)), ms(del99), loaded.cancelled, len(loaded.deletes), acceptTarget.Milliseconds(),
		verdict(len(loaded.deletes) > 0 && loaded.cancelled == len(loaded.deletes) && del99 < acceptTarget))
	if len(loaded.refused) > 0 {
		fmt.Printf("DELETEs not cancelled, the first: %s\n", loaded.refused[0])
	}
}

// acceptWhileApplying PUTs the 10 MiB feed and, while it is seen
// processing, has the uploaders PUT and the canceller PUT and DELETE. It
// returns what they measured and the feed's apply (started_at to
// finished_at, as the server recorded them).
func (s *benchServer) acceptWhileApplying(b *testing.B, clients []scaleClient, round int, feed benchFeedData) (acceptSamples, time.Duration) {
	b.Helper()
	code, body := s.put(s.ClientID, s.APIKey, fmt.Sprintf("big-%d.csv", round), feed.csv)
	if code != http.StatusOK {
		b.Fatalf("PUT of the 10 MiB feed: %d %s", code, body)
	}
	var accepted struct {
		StatusURL string `json:"status_url"`
	}
	if err := json.Unmarshal(body, &accepted); err != nil || accepted.StatusURL == "" {
		b.Fatalf("PUT of the 10 MiB feed: no status_url in %s", body)
	}
	status := func() benchStatus {
		req, _ := http.NewRequest(http.MethodGet, s.URL+accepted.StatusURL, nil)
		req.Header.Set("x-api-key", s.APIKey)
		resp, err := s.client.Do(req)
		if err != nil {
			b.Fatalf("GET %s: %v", accepted.StatusURL, err)
		}
		defer resp.Body.Close()
		var st benchStatus
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %d %v", accepted.StatusURL, resp.StatusCode, err)
		}
		return st
	}
	deadline := time.Now().Add(time.Minute)
	for st := status(); st.Status == "accepted"; st = status() {
		if time.Now().After(deadline) {
			b.Fatalf("the 10 MiB feed still accepted a minute after its 200")
		}
		time.Sleep(bigPoll)
	}
	var mu sync.Mutex
	applying := true // the feed not yet seen finished
	during := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return applying
	}
	var out acceptSamples
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		r := s.acceptPhase(b, clients, round, done)
		mu.Lock()
		out.add(r)
		mu.Unlock()
	})
	wg.Go(func() {
		r := s.cancelWaiting(b, round, done, during)
		mu.Lock()
		out.add(r)
		mu.Unlock()
	})
	var st benchStatus
	for st = status(); st.Status == "processing"; st = status() {
		if time.Now().After(deadline) {
			close(done)
			wg.Wait()
			b.Fatalf("the 10 MiB feed still processing a minute after its 200")
		}
		time.Sleep(bigPoll)
	}
	mu.Lock()
	applying = false
	mu.Unlock()
	close(done)
	wg.Wait()
	if st.Status != "applied" || st.RowsApplied != len(feed.rows) {
		b.Fatalf("10 MiB feed: %s, %d of %d rows applied: %v", st.Status, st.RowsApplied, len(feed.rows), st.Errors)
	}
	var apply time.Duration
	if st.StartedAt != nil && st.FinishedAt != nil {
		apply = st.FinishedAt.Sub(*st.StartedAt)
	}
	return out, apply
}

// acceptPhase has each uploader PUT 2-row feeds of its client, one after
// the other, until done is closed or, when done is nil, for acceptBaseline.
// A PUT counts when it was sent before done was closed.
func (s *benchServer) acceptPhase(b *testing.B, clients []scaleClient, round int, done <-chan struct{}) acceptSamples {
	b.Helper()
	end := time.Now().Add(acceptBaseline)
	var mu sync.Mutex
	var out acceptSamples
	var wg sync.WaitGroup
	for u, cl := range clients {
		wg.Go(func() {
			for i := 0; ; i++ {
				if done == nil && time.Now().After(end) {
					return
				}
				select {
				case <-done:
					return
				default:
				}
				t0 := time.Now()
				code, body := s.put(cl.id, cl.key, fmt.Sprintf("small-%d-%d-%d.csv", round, u, i), smallFeed(u, i))
				took := time.Since(t0)
				if code != http.StatusOK {
					b.Errorf("PUT of a 2-row feed: %d %s", code, body)
					return
				}
				mu.Lock()
				out.puts = append(out.puts, took)
				mu.Unlock()
				time.Sleep(acceptPause)
			}
		})
	}
	wg.Wait()
	return out
}

// cancelWaiting PUTs 2-row feeds of the demo client, which wait behind its
// 10 MiB feed, and DELETEs each, until done is closed; a DELETE counts when
// it was sent while during says the feed applies.
func (s *benchServer) cancelWaiting(b *testing.B, round int, done <-chan struct{}, during func() bool) acceptSamples {
	b.Helper()
	var out acceptSamples
	for i := 0; ; i++ {
		select {
		case <-done:
			return out
		default:
		}
		code, body := s.put(s.ClientID, s.APIKey, fmt.Sprintf("cancel-%d-%d.csv", round, i), smallFeed(0, i))
		if code != http.StatusOK {
			b.Errorf("PUT of a 2-row feed of the demo client: %d %s", code, body)
			return out
		}
		var up struct {
			ID string `json:"upload_id"`
		}
		if err := json.Unmarshal(body, &up); err != nil || up.ID == "" {
			b.Errorf("PUT of a 2-row feed of the demo client: no upload_id in %s", body)
			return out
		}
		if !during() {
			return out
		}
		t0 := time.Now()
		req, _ := http.NewRequest(http.MethodDelete, s.URL+"/stock/"+s.ClientID+"/uploads/"+up.ID, nil)
		req.Header.Set("x-api-key", s.APIKey)
		resp, err := s.client.Do(req)
		if err != nil {
			b.Errorf("DELETE: %v", err)
			return out
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		out.deletes = append(out.deletes, time.Since(t0))
		var st struct {
			Status string `json:"status"`
		}
		_ = json.Unmarshal(answer, &st)
		if resp.StatusCode == http.StatusOK && st.Status == "cancelled" {
			out.cancelled++
		} else {
			out.refused = append(out.refused, fmt.Sprintf("%d %s", resp.StatusCode, answer))
		}
		time.Sleep(5 * acceptPause)
	}
}

// put PUTs body as file name of client with key, and returns the answer.
func (s *benchServer) put(client, key, name string, body []byte) (int, []byte) {
	req, _ := http.NewRequest(http.MethodPut, s.URL+"/stock/"+client+"/"+name, bytes.NewReader(body))
	req.Header.Set("x-api-key", key)
	req.Header.Set("Content-Type", "application/csv")
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, answer
}
