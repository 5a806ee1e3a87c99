package worker

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"storelink"
)

// paceSpan is how far back the processing rate looks: long enough to smooth
// out one large file, short enough to follow a change of load.
const paceSpan = 60

// pace counts the uploads this process finished in each of the last
// paceSpan seconds.
type pace struct {
	mu     sync.Mutex
	start  time.Time
	counts [paceSpan]int
	secs   [paceSpan]int64 // the Unix second each count is for
}

func (p *pace) add(now time.Time) {
	sec := now.Unix()
	p.mu.Lock()
	defer p.mu.Unlock()
	i := sec % paceSpan
	if p.secs[i] != sec {
		p.secs[i], p.counts[i] = sec, 0
	}
	p.counts[i]++
}

// perSecond is the rate over the last paceSpan seconds, or over the time
// since the processor started when that is shorter.
func (p *pace) perSecond(now time.Time) float64 {
	sec := now.Unix()
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for i := range p.counts {
		if sec-p.secs[i] < paceSpan {
			n += p.counts[i]
		}
	}
	span := min(now.Sub(p.start).Seconds(), paceSpan)
	return float64(n) / max(span, 1)
}

// backlogCollector reports the waiting uploads of every client at scrape
// time, from the database, so that every process shows the same.
type backlogCollector struct {
	uploads        storelink.UploadService
	waiting, stale *prometheus.Desc
}

func newBacklogCollector(uploads storelink.UploadService) *backlogCollector {
	return &backlogCollector{
		uploads: uploads,
		waiting: prometheus.NewDesc("storelink_uploads_waiting",
			"Uploads accepted and not yet picked up by a processor.", nil, nil),
		stale: prometheus.NewDesc("storelink_uploads_oldest_waiting_seconds",
			"Age of the oldest upload not yet picked up by a processor; 0 when none waits.", nil, nil),
	}
}

func (c *backlogCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.waiting; ch <- c.stale }

func (c *backlogCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// -1 when the database does not answer, as the other database gauges.
	waiting, age := -1.0, -1.0
	if b, err := c.uploads.Backlog(ctx, ""); err == nil {
		waiting, age = float64(b.Waiting), 0
		if !b.Oldest.IsZero() {
			age = max(time.Since(b.Oldest).Seconds(), 0)
		}
	}
	ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, waiting)
	ch <- prometheus.MustNewConstMetric(c.stale, prometheus.GaugeValue, age)
}
