package main

// The memory benchmark of issue 15, item 6 (its second half): serve's
// resident memory with 1,000,000 deliveries pending. One client has 100
// webhook endpoints, each on a loopback address of its own (the receiver
// of bench_endpoints_test.go), so that each of 10,000 events, made by order
// calls over HTTP (2,000 orders, five calls each), queues 100 deliveries.
// They are made while every endpoint holds its requests, by a serve with a
// 10-minute timeout that is then killed; a serve with the default settings
// then starts on that database with a million deliveries pending. Its
// resident memory is read once it has read them and sent what it may
// while the endpoints still hold (VmRSS, and VmHWM, the peak), then again
// after 20 s of delivering to endpoints that answer after 50 ms (VmHWM).
// Run it with bench/pending-memory, or
//
//	go test ./cmd/storelink -run '^$' -bench '^BenchmarkPendingMemory$' -benchtime 1x
//
// The target, RSS under 200 MiB, is printed MET or MISSED; the benchmark
// never fails on memory.

import (
	"fmt"
	"testing"
	"time"

	"storelink/worker"
)

const (
	pmEndpoints  = 100
	pmOrders     = 2000 // × 5 events × 100 endpoints: 1,000,000 deliveries
	pmDeliverFor = 20 * time.Second
	pmTargetMiB  = 200
)

// BenchmarkPendingMemory is the benchmark of issue 15, item 6's second
// half; see the top of the file.
func BenchmarkPendingMemory(b *testing.B) {
	needFiles(b, 4*pmEndpoints+2*worker.DefaultWorkers+1024)
	rc := newEPReceiver(b, pmEndpoints, 0)
	loadBefore := loadAverage()
	var rows []string
	for b.Loop() {
		b.StopTimer()
		data := b.TempDir()
		rc.phase(epHold)
		builder := startServe(b, data, "--webhook-allow-private", "--webhook-timeout", "10m")
		clients := epSetup(b, builder, [][]string{rc.urls})
		start := time.Now()
		calls := epDrive(b, builder, clients, pmOrders, 0, 0)
		build := time.Since(start)
		builder.Kill()
		rc.waitHeld(b, 0)
		b.StartTimer()

		p := startServe(b, data, "--webhook-allow-private")
		// The queue is read by the first round: once it has sent what its
		// pace allows (one attempt to each endpoint, all held), it is in.
		rc.waitHeld(b, pmEndpoints)
		time.Sleep(2 * time.Second) // memory is read with the held queue at rest, after the same pause in every run
		rss, peak := procStatus(b, p.PID(), "VmRSS"), procStatus(b, p.PID(), "VmHWM")
		// The gauge counts the file's pending deliveries, -1 when that
		// takes over 2 s (a busy machine).
		pending := -1.0
		for range 10 {
			if pending = epMetric(b, p, "storelink_webhook_pending_deliveries"); pending >= 0 {
				break
			}
		}

		rc.phase(epHang)
		rc.hangOn.Store(false)
		start = time.Now()
		time.Sleep(pmDeliverFor)
		delivered := rc.hits()
		rate := float64(delivered) / time.Since(start).Seconds()
		peakDelivering := procStatus(b, p.PID(), "VmHWM")
		p.Kill()
		rc.phase(epHold)
		rc.waitHeld(b, 0)
		b.ReportMetric(max(peak, peakDelivering), "MiB-peak")
		rows = append(rows, fmt.Sprintf("%.0f deliveries pending (%d events over %d orders, each to %d endpoints, built in %.1f s): "+
			"serve's RSS %.1f MiB once it read them (peak %.1f MiB); while delivering %.0f events/s for %s, peak %.1f MiB; target < %d MiB: %s",
			pending, len(calls), pmOrders, pmEndpoints, build.Seconds(), rss, peak, rate, pmDeliverFor,
			peakDelivering, pmTargetMiB, verdict(max(peak, peakDelivering) < pmTargetMiB)))
	}
	fmt.Println("--- serve's memory with a million deliveries pending (issue 15, item 6) ---")
	fmt.Printf("machine load average before %s, after %s\n", loadBefore, loadAverage())
	for _, r := range rows {
		fmt.Println(r)
	}
}
