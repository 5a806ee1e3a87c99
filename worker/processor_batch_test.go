package worker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"storelink"
)

// Small files waiting together are claimed and applied in one batch, each
// checked by the feed checker and finished with its own report and error
// file, a file-level error rejecting its own; a file larger than the
// batch's bytes is applied alone, after them.
func TestProcessorBatches(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if _, _, err := f.service.Partners.PutStore(ctx, f.clientID, "S1", "Store"); err != nil {
		t.Fatal(err)
	}
	accept := func(body string) *storelink.Upload {
		u, _, err := f.service.Uploads.Accept(ctx, storelink.NewUpload{ClientID: f.clientID, FileName: "f.csv", Body: storelink.ChunksOf([]byte(body)), SHA256: "00"},
			storelink.CapacityPolicy{Base: 1 << 30, Window: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	const header = "store;ean;article_number;quantity;price\n"
	good := accept(header + "S1;4006381333931;A;1;1.00\nS1;96385074;B;2;2.00\n")
	broken := accept("store;ean;article_number;quantity;price\nS1;4006381333931;A;\"1;1.00\n")
	partly := accept(header + "S1;4006381333931;A;3;1.00\nS9;96385074;B;2;2.00\n")
	large := accept(header + strings.Repeat("S1;4006381333931;A;4;1.00\n", 60))

	reg := prometheus.NewRegistry()
	p := NewProcessor(f.service.Uploads, nil, "test", reg)
	p.Batch = storelink.BatchLimit{Uploads: 10, Bytes: 1 << 10}
	processed := func(status storelink.UploadStatus) float64 {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				if f.GetName() == "storelink_uploads_processed_total" && m.GetLabel()[0].GetValue() == string(status) {
					return m.GetCounter().GetValue()
				}
			}
		}
		return 0
	}
	worked, err := p.RunOnce(ctx)
	if !worked || err != nil {
		t.Fatalf("RunOnce = %v, %v", worked, err)
	}
	if processed(storelink.UploadApplied) != 2 || processed(storelink.UploadRejected) != 1 {
		t.Fatalf("after the batch: %v applied, %v rejected; want the three small files, 2 and 1",
			processed(storelink.UploadApplied), processed(storelink.UploadRejected))
	}
	status := func(u *storelink.Upload) *storelink.Upload {
		t.Helper()
		got, err := f.service.Uploads.Upload(ctx, f.clientID, u.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if u := status(good); u.Status != storelink.UploadApplied || u.RowsApplied != 2 || u.RowsRejected != 0 {
		t.Fatalf("good file: %+v", u)
	}
	if u := status(broken); u.Status != storelink.UploadRejected || len(u.Errors) != 1 || u.Errors[0].Type != storelink.ProblemFile {
		t.Fatalf("broken file: %+v, want rejected with a %s", u, storelink.ProblemFile)
	}
	if u := status(partly); u.Status != storelink.UploadApplied || u.RowsApplied != 1 || u.RowsRejected != 1 {
		t.Fatalf("file with a row of an unknown store: %+v", u)
	}
	errs, err := f.service.Uploads.UploadErrorFile(ctx, f.clientID, partly.ID)
	if err != nil || !strings.Contains(string(errs), "S9;96385074;B;2;2.00;3;Store does not exist") {
		t.Fatalf("error file of the partly applied file = %q, %v; want its dropped row", errs, err)
	}
	if u := status(large); u.Status != storelink.UploadAccepted {
		t.Fatalf("the large file is %s after the batch, want accepted: it is applied alone", u.Status)
	}
	worked, err = p.RunOnce(ctx)
	if !worked || err != nil || status(large).Status != storelink.UploadApplied {
		t.Fatalf("RunOnce = %v, %v; the large file %+v, want applied", worked, err, status(large))
	}
	st, _, err := f.service.Uploads.Stock(ctx, f.clientID, storelink.StockFilter{Limit: 10})
	if err != nil || len(st) != 2 || st[0].Quantity != 4 || st[1].Quantity != 2 {
		t.Fatalf("stock = %+v, %v; want 4006381333931 at 4 (the large file, last), 96385074 at 2 (the good one)", st, err)
	}
}
