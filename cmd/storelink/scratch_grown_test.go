package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"storelink"
	"storelink/service"
	"storelink/sqlite"
	"storelink/worker"
)

func TestScratchGrownApply(t *testing.T) {
	tmpl := os.Getenv("SCRATCH_TEMPLATE")
	if tmpl == "" {
		t.Skip()
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "storelink.db")
	if tmpl != "empty" {
		copyFileT(t, tmpl, path)
	}
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	svc := service.New(sqlite.NewDriver(db))
	partner, _ := svc.CreatePartner(ctx, "Bench")
	client, err := svc.CreateClient(ctx, partner.ID, "DE", "EUR")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= benchStores; i++ {
		svc.PutStore(ctx, client.ID, fmt.Sprintf("S%02d", i), "x")
	}
	policy := storelink.CapacityPolicy{Base: 1 << 40, Window: time.Hour}
	p := worker.NewProcessor(svc, slog.New(slog.NewTextHandler(io.Discard, nil)), "bench", prometheus.NewRegistry())
	f := benchFeed(benchFeedBytes, -1, 0)
	f1 := benchFeed(benchFeedBytes, -1, 1)
	apply := func(f benchFeedData, prof string) {
		u, _, err := svc.Accept(ctx, storelink.NewUpload{ClientID: client.ID, FileName: "f.csv", Body: f.csv}, policy)
		if err != nil {
			t.Fatal(err)
		}
		if prof != "" {
			pf, _ := os.Create(prof)
			pprof.StartCPUProfile(pf)
			defer func() { pprof.StopCPUProfile(); pf.Close() }()
		}
		start := time.Now()
		cpu := selfCPU()
		if worked, err := p.RunOnce(ctx); !worked || err != nil {
			t.Fatal(worked, err)
		}
		t.Logf("apply: %v, cpu %v", time.Since(start), selfCPU()-cpu)
		got, _ := svc.Upload(ctx, client.ID, u.ID)
		if got.RowsApplied != len(f.rows) {
			t.Fatalf("%+v", got)
		}
	}
	apply(f, os.Getenv("SCRATCH_PROF"))
	apply(f1, "")
	apply(benchChanged(f1, 50, 1), "")
}

func copyFileT(t *testing.T, from, to string) {
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(to, data, 0o600)
}
