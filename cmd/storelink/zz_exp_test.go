package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"storelink"
)

// numbered: constants bound once per statement as ?1 ?2 ?3.
func expSQL(n int, numbered bool) string {
	if !numbered {
		return baselineSQL(n)
	}
	var q strings.Builder
	q.WriteString(`INSERT INTO stock (client_id, store_id, ean, article_number, quantity, price, retail_price,
	article_location, product_name, product_number, article_color, article_size, upload_id, updated_at) VALUES `)
	p := 4
	for i := range n {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString("(?1")
		for range 11 {
			fmt.Fprintf(&q, ",?%d", p)
			p++
		}
		q.WriteString(",?2,?3)")
	}
	s := baselineSQL(1)
	q.WriteString(s[strings.Index(s, " ON CONFLICT"):])
	return q.String()
}

func TestExpVariants(t *testing.T) {
	if os.Getenv("EXP") == "" {
		t.Skip()
	}
	feeds := [3][]benchRow{}
	for v := range feeds {
		feeds[v] = benchFeed(benchFeedBytes, -1, uint64(v)).rows
	}
	type variant struct {
		name      string
		savepoint bool
		numbered  bool
		extra     string
	}
	vs := []variant{{"plain", false, false, ""}, {"savepoint", true, false, ""}, {"numbered", false, true, ""},
		{"savepoint+tempmem", true, false, "&_pragma=temp_store(MEMORY)"},
		{"page8k", false, false, "_pragma=page_size(8192)&"}, {"page16k", false, false, "_pragma=page_size(16384)&"},
		{"page16k+savepoint", true, false, "_pragma=page_size(16384)&"}, {"page64k", false, false, "_pragma=page_size(65536)&"}}
	if e := os.Getenv("VARIANTS"); e != "" {
		var keep []variant
		for _, v := range vs {
			if strings.Contains(e, v.name+",") {
				keep = append(keep, v)
			}
		}
		vs = keep
	}
	dbs := make([]*sql.DB, len(vs))
	cid := storelink.NewID(time.Now())
	for i, v := range vs {
		path := filepath.Join(t.TempDir(), "b.db")
		pre, post := "", v.extra
		if strings.HasSuffix(v.extra, "&") {
			pre, post = v.extra, ""
		}
		db, _ := sql.Open("sqlite", "file:"+path+"?"+pre+"_pragma=busy_timeout(10000)&_journal_mode=WAL&_pragma=synchronous(FULL)&_txlock=immediate"+post)
		defer db.Close()
		db.SetMaxOpenConns(1)
		db.Exec(baselineTable)
		dbs[i] = db
		var ps int
		db.QueryRow("PRAGMA page_size").Scan(&ps)
		var jm string
		db.QueryRow("PRAGMA journal_mode").Scan(&jm)
		t.Logf("%s: page_size %d journal %s", v.name, ps, jm)
	}
	ctx := context.Background()
	batch := 200
	run := func(db *sql.DB, v variant, rows []benchRow) (time.Duration, time.Duration) {
		uploadID := storelink.NewID(time.Now())
		args := make([]any, 0, batch*14)
		cpu := selfCPU()
		start := time.Now()
		tx, _ := db.BeginTx(ctx, nil)
		defer tx.Rollback()
		if v.savepoint {
			tx.Exec("SAVEPOINT rows")
		}
		stmt, err := tx.PrepareContext(ctx, expSQL(batch, v.numbered))
		if err != nil {
			t.Fatal(err)
		}
		full := len(rows) / batch * batch
		for j := 0; j < full; j += batch {
			args = args[:0]
			if v.numbered {
				args = append(args, cid, uploadID, int64(5))
			}
			for _, r := range rows[j : j+batch] {
				if v.numbered {
					args = append(args, r.store, r.ean, r.article, r.qty, r.price, r.retail, r.location, "", "", "", "")
				} else {
					args = append(args, cid, r.store, r.ean, r.article, r.qty, r.price, r.retail, r.location, "", "", "", "", uploadID, int64(5))
				}
			}
			if _, err := stmt.ExecContext(ctx, args...); err != nil {
				t.Fatal(err)
			}
		}
		stmt.Close()
		if v.savepoint {
			tx.Exec("RELEASE rows")
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		return time.Since(start), selfCPU() - cpu
	}
	for i, v := range vs {
		run(dbs[i], v, feeds[0])
	}
	sum := make([][2]time.Duration, len(vs))
	for round := 0; round < 6; round++ {
		for i, v := range vs {
			w, c := run(dbs[i], v, feeds[1+round%2])
			sum[i][0] += w
			sum[i][1] += c
		}
	}
	for i, v := range vs {
		t.Logf("%-20s wall %v cpu %v", v.name, sum[i][0]/6, sum[i][1]/6)
	}
}

func BenchmarkExpPollCost(b *testing.B) {
	s := startBenchServer(b)
	f := benchFeed(benchFeedBytes, 100, 1)
	s.importFeed(b, "x.csv", f, time.Millisecond)
	code, list := s.get(b, "/stock/"+s.ClientID+"/uploads?limit=1")
	_ = code
	ups := list["uploads"]
	b.Logf("%v", fmt.Sprint(ups)[:80])
	cpu := cpuTime(b, s.PID())
	self := selfCPU()
	start := time.Now()
	for i := 0; i < 1000; i++ {
		s.get(b, "/stock/"+s.ClientID+"/uploads?limit=1")
	}
	b.Logf("1000 GETs: %v wall, serve CPU %v, client CPU %v", time.Since(start), cpuTime(b, s.PID())-cpu, selfCPU()-self)
}

func BenchmarkExpPerf(b *testing.B) {
	s := startBenchServer(b)
	feeds := [3]benchFeedData{}
	for v := range feeds {
		feeds[v] = benchFeed(benchFeedBytes, -1, uint64(v))
	}
	s.importFeed(b, "first.csv", feeds[0], bigPoll)
	cmd := exec.Command("perf", "record", "-F", "999", "-g", "-o", "/tmp/prof/perf.data", "-p", strconv.Itoa(s.PID()))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	cpu := cpuTime(b, s.PID())
	for i := 0; i < 4; i++ {
		r := s.importFeed(b, fmt.Sprintf("f%d.csv", i), feeds[1+i%2], bigPoll)
		b.Logf("%d: %.0f rows/s, after200 %v, cpu %v", i, r.rowsPerSec(), r.after200, r.cpu)
	}
	b.Logf("serve CPU over 4 imports %v", cpuTime(b, s.PID())-cpu)
	cmd.Process.Signal(syscall.SIGINT)
	cmd.Wait()
}
