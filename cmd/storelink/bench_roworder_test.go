package main

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
)

// The row orders a feed arrives in. Exporters write stock store by store
// (the generator's order), article by article (each article's stock in
// every store) or in no order at all; ingest must be fast in each.
var feedOrders = []string{"store by store", "article by article", "shuffled"}

// inOrder returns f with its rows in the named order of feedOrders. The
// shuffle is a fixed permutation, the same on every run.
func inOrder(f benchFeedData, order string) benchFeedData {
	rows := slices.Clone(f.rows)
	switch order {
	case "store by store":
	case "article by article":
		slices.SortStableFunc(rows, func(x, y benchRow) int {
			return cmp.Or(cmp.Compare(x.ean, y.ean), cmp.Compare(x.store, y.store))
		})
	case "shuffled":
		for i := len(rows) - 1; i > 0; i-- {
			j := int(mix(uint64(i)^0x5f3759df) % uint64(i+1))
			rows[i], rows[j] = rows[j], rows[i]
		}
	default:
		panic("unknown order " + order)
	}
	out := benchFeedData{rows: rows}
	out.csv = append(out.csv, "store;ean;article_number;quantity;price;retail_price;store_article_location\n"...)
	for _, r := range rows {
		out.csv = r.appendCSV(out.csv)
	}
	return out
}

// orderFigures are one order's medians: the whole path and its baseline,
// of the first import into an empty table and of the feed re-sent with one
// row in 50 changed.
type orderFigures struct {
	order                   string
	first, firstBase        float64 // rows/s
	resent, resentBase      float64 // rows/s, medians
	firstRatio, resentRatio float64 // medians of the per-import ratios
	peakRSS                 float64 // MiB
}

// orderRun is one set-up measured in every order: a fresh serve and a
// fresh baseline per order.
type orderRun struct {
	// start starts a serve with the 50 stores and a baseline, both empty.
	start func(b *testing.B) (*benchServer, func(b *testing.B, rows []benchRow) importResult)
}

// measureOrders imports the 10 MiB feed in each order of feedOrders into
// an empty table, then re-sends it rounds times with one row in 50 changed,
// each import paired with the baseline's upsert of the same rows in the
// same order.
func measureOrders(b *testing.B, run orderRun, rounds int) []orderFigures {
	base := benchFeed(benchFeedBytes, -1, 0)
	var out []orderFigures
	for _, order := range feedOrders {
		f := inOrder(base, order)
		s, upsert := run.start(b)
		held := heldStock{}
		fig := orderFigures{order: order}
		w := s.importFeedUnchanged(b, "first.csv", f, bigPoll, held.unchanged(f))
		r := upsert(b, f.rows)
		fig.first, fig.firstBase = w.rowsPerSec(), r.rowsPerSec()
		fig.firstRatio = fig.first / fig.firstBase
		var resent, resentBase, ratios []float64
		for i := range rounds {
			again := benchChanged(f, 50, uint64(i+1))
			var w, r importResult
			// Alternate which side goes first, so that neither always
			// meets a cache the other warmed.
			if i%2 == 0 {
				w = s.importFeedUnchanged(b, fmt.Sprintf("again-%d.csv", i), again, bigPoll, held.unchanged(again))
				r = upsert(b, again.rows)
			} else {
				r = upsert(b, again.rows)
				w = s.importFeedUnchanged(b, fmt.Sprintf("again-%d.csv", i), again, bigPoll, held.unchanged(again))
			}
			resent, resentBase = append(resent, w.rowsPerSec()), append(resentBase, r.rowsPerSec())
			ratios = append(ratios, w.rowsPerSec()/r.rowsPerSec())
		}
		fig.resent, fig.resentBase, fig.resentRatio = medianOf(resent), medianOf(resentBase), medianOf(ratios)
		fig.peakRSS = procStatus(b, s.PID(), "VmHWM")
		b.Logf("%s: first import %.0f rows/s, baseline %.0f, ratio %.2f; re-sent %.0f rows/s, baseline %.0f, ratio %.2f; peak RSS %.1f MiB",
			order, fig.first, fig.firstBase, fig.firstRatio, fig.resent, fig.resentBase, fig.resentRatio, fig.peakRSS)
		s.Kill()
		out = append(out, fig)
	}
	return out
}

// printRowOrders prints the figures of measureOrders against the targets:
// each order's first import at least firstMin of its baseline and the
// re-sent feed at least resentMin (when not zero), and the slowest order
// within 20% of the fastest.
func printRowOrders(title string, figs []orderFigures, firstMin, resentMin float64) {
	fmt.Printf("--- %s, by row order (fresh serve per order) ---\n", title)
	var firsts, resents []float64
	for _, f := range figs {
		fmt.Printf("%-18s first import %7.0f rows/s, baseline %7.0f, ratio %.3f target >= %.2f: %s; re-sent (2%% changed) %7.0f rows/s, baseline %7.0f, ratio %.3f",
			f.order+":", f.first, f.firstBase, f.firstRatio, firstMin, verdict(f.firstRatio >= firstMin), f.resent, f.resentBase, f.resentRatio)
		if resentMin > 0 {
			fmt.Printf(" target >= %.2f: %s", resentMin, verdict(f.resentRatio >= resentMin))
		}
		fmt.Printf("; peak RSS %.1f MiB\n", f.peakRSS)
		firsts, resents = append(firsts, f.first), append(resents, f.resent)
	}
	spread := func(v []float64) float64 { return slices.Min(v) / slices.Max(v) }
	fmt.Printf("slowest order / fastest: first import %.3f, re-sent %.3f; target >= 0.80: %s\n",
		spread(firsts), spread(resents), verdict(spread(firsts) >= 0.8 && spread(resents) >= 0.8))
}

// benchRowOrders measures the SQLite set-up in every order against the C
// baseline, with b.N re-sent rounds each; nil without python3.
func benchRowOrders(b *testing.B) []orderFigures {
	if c, why := openCBaseline(b); c == nil {
		b.Logf("no C baseline: %s", why)
		return nil
	}
	return measureOrders(b, orderRun{start: func(b *testing.B) (*benchServer, func(*testing.B, []benchRow) importResult) {
		c, why := openCBaseline(b)
		if c == nil {
			b.Fatalf("C baseline: %s", why)
		}
		return startBenchServer(b), c.upsert
	}}, b.N)
}
