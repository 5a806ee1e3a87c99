package dashboard

import (
	"testing"
	"time"

	"storelink"
)

func TestGauge(t *testing.T) {
	for _, c := range []struct {
		size, left        int64
		label, level, arc string
	}{
		{1000, 1000, "0%", "ok", ""},
		{1000, 999, "<1%", "ok", "M10 60 A50 50 0 0 1 10.00 59.84"},
		{1000, 500, "50%", "ok", "M10 60 A50 50 0 0 1 60.00 10.00"},
		{1000, 250, "75%", "warn", "M10 60 A50 50 0 0 1 95.36 24.64"},
		{1000, 0, "100%", "full", "M10 60 A50 50 0 0 1 110.00 60.00"},
		{0, 0, "0%", "ok", ""},
	} {
		g := newGauge(storelink.Capacity{BytesPerWindow: c.size, BytesLeft: c.left})
		if g.Label != c.label || g.Level != c.level || g.Arc != c.arc || g.Used != c.size-c.left {
			t.Errorf("gauge of %d left of %d = %q %s %q used %d; want %q %s %q", c.left, c.size, g.Label, g.Level, g.Arc, g.Used, c.label, c.level, c.arc)
		}
	}
}

func TestChart(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	up := func(ago time.Duration, n int64) storelink.Upload {
		return storelink.Upload{ReceivedAt: now.Add(-ago), SizeBytes: n}
	}
	uploads := []storelink.Upload{
		up(time.Minute, 300), up(30*time.Minute, 100), // the last window
		up(23*time.Hour+30*time.Minute, 50), // the first window
		up(25*time.Hour, 999),               // before the chart
	}
	c := newChart(uploads, now, time.Hour, 800, 240, 48)
	if len(c.Bars) != chartBins || c.Total != 450 || c.Uploads != 3 || c.Peak != 400 || c.Span != 24*time.Hour {
		t.Fatalf("chart = %d bars, total %d in %d, peak %d, span %s", len(c.Bars), c.Total, c.Uploads, c.Peak, c.Span)
	}
	first, last := c.Bars[0], c.Bars[chartBins-1]
	if first.Bytes != 50 || last.Bytes != 400 || last.Uploads != 2 || !last.To.Equal(now) {
		t.Errorf("first bar %+v, last bar %+v", first, last)
	}
	// The capacity (800) is within twice the peak: drawn, and it sets the
	// scale, so the peak bar is half the plot.
	if !c.ShowCap || c.CapY != 4 || last.H != 22 || last.Y != 26 {
		t.Errorf("capacity line %v at %.1f, last bar h %.1f y %.1f", c.ShowCap, c.CapY, last.H, last.Y)
	}
	if c.Bars[5].H != 0 {
		t.Errorf("an empty window has a bar of %.1f", c.Bars[5].H)
	}
	// A capacity far above what is sent is left off the scale.
	if c := newChart(uploads, now, time.Hour, 1<<20, 240, 48); c.ShowCap || c.Bars[chartBins-1].H != 44 {
		t.Errorf("with a large capacity: line %v, peak bar %.1f", c.ShowCap, c.Bars[chartBins-1].H)
	}
}

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1 KiB", 1536: "1.5 KiB", 24 << 20: "24 MiB", 3 << 30: "3 GiB"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
	for d, want := range map[time.Duration]string{850 * time.Millisecond: "850ms", 12 * time.Second: "12s", 250 * time.Second: "4m10s",
		time.Hour: "1h", 24 * time.Hour: "24h", 50 * time.Hour: "2d2h", 5 * time.Minute: "5m"} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%s) = %q, want %q", d, got, want)
		}
	}
	for m, want := range map[storelink.Money]string{500: "5.00", 1999: "19.99", 5: "0.05", -120: "-1.20"} {
		if got := formatMoney(m); got != want {
			t.Errorf("formatMoney(%d) = %q, want %q", m, got, want)
		}
	}
	if got := redactURL("https://user:secret@h.example/x?a=1"); got != "https://user:xxxxx@h.example/x?a=1" {
		t.Errorf("redactURL = %q", got)
	}
	for in, want := range map[string]string{
		"/dashboard/orders?x=1": "/dashboard/orders?x=1", "https://evil.example/dashboard/": "/dashboard/",
		"//evil.example/dashboard/": "/dashboard/", "/admin/partners": "/dashboard/", "": "/dashboard/",
		"/dashboard/\\evil": "/dashboard/", "/dashboard/../admin": "/dashboard/", "/dashboard/./x": "/dashboard/",
	} {
		if got := localPath(in); got != want {
			t.Errorf("localPath(%q) = %q, want %q", in, got, want)
		}
	}
}
