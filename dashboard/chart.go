package dashboard

import (
	"fmt"
	"math"
	"time"

	"storelink"
)

// gauge is a client's capacity as a half-circle: the coloured arc is the
// share of the bucket used, and it empties again as the bucket refills.
// The geometry is computed here so the template only writes numbers into
// inline SVG (no script, no inline style).
type gauge struct {
	storelink.Capacity
	Used    int64
	Percent int // of the bucket used, 0…100
	// Label is the percentage as shown: "<1%" when something but less
	// than half a percent is used, so a used bucket never reads 0%.
	Label string
	Arc   string // SVG path of the used part; empty when nothing is used
	Level string // ok, warn or full: the arc's colour
}

// gaugeTrack is the full half-circle the used arc is drawn over.
const gaugeTrack = "M10 60 A50 50 0 0 1 110 60"

func newGauge(c storelink.Capacity) gauge {
	g := gauge{Capacity: c, Used: max(c.BytesPerWindow-c.BytesLeft, 0), Level: "ok", Label: "0%"}
	if c.BytesPerWindow <= 0 {
		return g
	}
	f := math.Min(float64(g.Used)/float64(c.BytesPerWindow), 1)
	g.Percent = int(math.Round(f * 100))
	g.Label = fmt.Sprintf("%d%%", g.Percent)
	if g.Percent == 0 && g.Used > 0 {
		g.Label = "<1%"
	}
	switch {
	case f >= 0.9:
		g.Level = "full"
	case f >= 0.7:
		g.Level = "warn"
	}
	if f > 0 {
		theta := math.Pi * (1 - f) // from the left end (π) over the top to the right (0)
		x, y := 60+50*math.Cos(theta), 60-50*math.Sin(theta)
		g.Arc = fmt.Sprintf("M10 60 A50 50 0 0 1 %.2f %.2f", x, y)
	}
	return g
}

// chart is the bytes a client sent over the last chartBins capacity
// windows, one bar per window. Bars are scaled to the busiest window, so a
// client that sends little still has a readable shape; the capacity per
// window is drawn as a dashed line when it is within twice that scale (a
// bar that reaches it is a window in which the client used its whole
// bucket), and named in the legend otherwise.
type chart struct {
	Width, Height float64
	Bars          []bar
	// CapY is the y of the capacity line; ShowCap tells whether it is drawn.
	CapY     float64
	ShowCap  bool
	Capacity int64
	// Peak is the most bytes received in one window.
	Peak    int64
	Total   int64
	Uploads int
	From    time.Time
	To      time.Time
	Bin     time.Duration
	Span    time.Duration
}

type bar struct {
	X, Y, W, H float64
	Bytes      int64
	Uploads    int
	From, To   time.Time
}

// chartBins is how many windows the chart shows.
const chartBins = 24

// chartSince is the oldest moment the chart of a client ending now covers.
func chartSince(now time.Time, window time.Duration) time.Time {
	return now.Add(-time.Duration(chartBins) * chartBin(window))
}

func chartBin(window time.Duration) time.Duration {
	if window <= 0 {
		return time.Hour
	}
	return window
}

// newChart bins uploads (newest first or in any order) by received time.
func newChart(uploads []storelink.Upload, now time.Time, window time.Duration, capacity int64, width, height float64) chart {
	bin := chartBin(window)
	c := chart{Width: width, Height: height, Capacity: capacity, To: now, Bin: bin}
	c.From = chartSince(now, window)
	bytes := make([]int64, chartBins)
	counts := make([]int, chartBins)
	for _, u := range uploads {
		if u.ReceivedAt.Before(c.From) || u.ReceivedAt.After(now) {
			continue
		}
		i := min(int(u.ReceivedAt.Sub(c.From)/bin), chartBins-1)
		bytes[i] += u.SizeBytes
		counts[i]++
		c.Total += u.SizeBytes
		c.Uploads++
	}
	for _, b := range bytes {
		c.Peak = max(c.Peak, b)
	}
	c.Span = time.Duration(chartBins) * bin
	top := max(c.Peak, 1)
	if capacity > 0 && capacity <= 2*top {
		top, c.ShowCap = max(top, capacity), true
	}
	const pad = 4 // room at the top for the capacity line
	plot := height - pad
	slot := width / chartBins
	for i := range chartBins {
		h := 0.0
		if bytes[i] > 0 {
			h = math.Max(plot*float64(bytes[i])/float64(top), 1.5) // a small upload still shows
		}
		from := c.From.Add(time.Duration(i) * bin)
		c.Bars = append(c.Bars, bar{
			X: float64(i)*slot + 1, W: math.Max(slot-2, 1), Y: height - h, H: h,
			Bytes: bytes[i], Uploads: counts[i], From: from, To: from.Add(bin),
		})
	}
	c.CapY = height - plot*float64(capacity)/float64(top)
	return c
}
