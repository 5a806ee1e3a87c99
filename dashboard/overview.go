package dashboard

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"storelink"
)

// The overview lists every client with what needs a look first: failed
// deliveries, rejected uploads, a capacity used up. Its figures come from
// one read of every client's (AdminService.ClientSummaries), sorted and
// paged here, so that a page costs the same few statements with 1,000
// clients as with one.

// overviewRow is a client on the overview.
type overviewRow struct {
	storelink.ClientSummary
	Gauge     gauge
	Exhausted bool
	// Problems counts the kinds of trouble the client has, 0 to 3.
	Problems int
}

type overviewData struct {
	Q    string
	Sort string
	// Only lists the clients with problems alone.
	Only  bool
	Sorts []sortOption
	Rows  []overviewRow
	// Matched counts the clients the search found, WithProblems those of
	// them with a problem.
	Matched      int
	WithProblems int
	Page, Pages  int
	// Prev and Next are the neighbouring pages, 0 for none.
	Prev, Next    int
	QueueDepth    int
	Waiting       int
	OldestWaiting time.Duration
	Pending       int
	OldestPending time.Duration
}

// sortOption is an order the overview can list clients in.
type sortOption struct {
	Key, Label string
}

var overviewSorts = []sortOption{
	{"problems", "problems first"},
	{"name", "partner name"},
	{"failed", "failed deliveries"},
	{"rejected", "rejected uploads"},
	{"capacity", "capacity used"},
	{"upload", "latest upload"},
}

// overviewPage is how many clients a page of the overview shows.
const overviewPage = 50

func (h *Handler) handleOverview(w http.ResponseWriter, r *http.Request, v view) {
	ctx, q := r.Context(), r.URL.Query()
	d := overviewData{Q: strings.TrimSpace(q.Get("q")), Sort: q.Get("sort"), Only: q.Get("only") == "problems", Sorts: overviewSorts, Page: 1}
	if d.Sort == "" {
		d.Sort = "problems"
	}
	less, ok := overviewOrders[d.Sort]
	if !ok {
		h.renderError(w, r, storelink.Errorf(storelink.EINVALID, "sort must be one of problems, name, failed, rejected, capacity or upload."))
		return
	}
	if p := q.Get("page"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			h.renderError(w, r, storelink.Errorf(storelink.EINVALID, "page must be a whole number from 1 on."))
			return
		}
		d.Page = n
	}
	summaries, err := h.Admin.ClientSummaries(ctx, d.Q, h.Capacity)
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	rows := make([]overviewRow, 0, len(summaries))
	for _, c := range summaries {
		row := overviewRow{ClientSummary: c, Gauge: newGauge(c.Capacity), Exhausted: c.CapacityExhausted()}
		for _, bad := range []bool{c.FailedDeliveries > 0, c.RejectedUploads > 0, row.Exhausted} {
			if bad {
				row.Problems++
			}
		}
		if row.Problems > 0 {
			d.WithProblems++
		}
		if row.Problems > 0 || !d.Only {
			rows = append(rows, row)
		}
	}
	d.Matched = len(summaries)
	slices.SortStableFunc(rows, func(a, b overviewRow) int {
		if c := less(a, b); c != 0 {
			return c
		}
		return byName(a, b)
	})
	limit := queryLimit(r, overviewPage, 500)
	d.Pages = max((len(rows)+limit-1)/limit, 1)
	d.Page = min(d.Page, d.Pages)
	d.Rows = rows[(d.Page-1)*limit : min(d.Page*limit, len(rows))]
	if d.Page > 1 {
		d.Prev = d.Page - 1
	}
	if d.Page < d.Pages {
		d.Next = d.Page + 1
	}
	if err := h.queueFigures(r, &d); err != nil {
		h.renderError(w, r, err)
		return
	}
	v.Title, v.Nav, v.Data = "Overview", "overview", d
	h.render(w, r, http.StatusOK, "overview", v)
}

// queueFigures fills in the uploads waiting and the deliveries pending.
func (h *Handler) queueFigures(r *http.Request, d *overviewData) error {
	ctx, now := r.Context(), h.Now()
	var err error
	if d.QueueDepth, err = h.Uploads.QueueDepth(ctx); err != nil {
		return err
	}
	backlog, err := h.Uploads.Backlog(ctx, "")
	if err != nil {
		return err
	}
	d.Waiting = backlog.Waiting
	if !backlog.Oldest.IsZero() {
		d.OldestWaiting = max(now.Sub(backlog.Oldest), 0)
	}
	d.Pending, d.OldestPending, err = h.Webhooks.PendingDeliveries(ctx)
	return err
}

// overviewOrders compare two rows for each sort; ties go by name.
var overviewOrders = map[string]func(a, b overviewRow) int{
	"problems": func(a, b overviewRow) int {
		return cmp.Or(cmp.Compare(b.Problems, a.Problems), cmp.Compare(b.FailedDeliveries, a.FailedDeliveries),
			cmp.Compare(b.RejectedUploads, a.RejectedUploads), cmp.Compare(b.used(), a.used()))
	},
	"name":     func(a, b overviewRow) int { return 0 },
	"failed":   func(a, b overviewRow) int { return cmp.Compare(b.FailedDeliveries, a.FailedDeliveries) },
	"rejected": func(a, b overviewRow) int { return cmp.Compare(b.RejectedUploads, a.RejectedUploads) },
	"capacity": func(a, b overviewRow) int { return cmp.Compare(b.used(), a.used()) },
	"upload": func(a, b overviewRow) int {
		switch {
		case a.LastUpload == nil && b.LastUpload == nil:
			return 0
		case a.LastUpload == nil:
			return 1
		case b.LastUpload == nil:
			return -1
		}
		return b.LastUpload.ReceivedAt.Compare(a.LastUpload.ReceivedAt)
	},
}

// used is the share of the client's capacity used, 0 to 1.
func (r overviewRow) used() float64 {
	if r.Capacity.BytesPerWindow <= 0 {
		return 0
	}
	return float64(r.Gauge.Used) / float64(r.Capacity.BytesPerWindow)
}

// byName orders clients by partner name, then country code.
func byName(a, b overviewRow) int {
	return cmp.Or(cmp.Compare(a.PartnerName, b.PartnerName), cmp.Compare(a.CountryCode, b.CountryCode), cmp.Compare(a.ID, b.ID))
}
