package drivertest

import (
	"fmt"
	"reflect"

	"storelink"
	"storelink/service"
)

// testUploadUnchanged: an apply writes only the rows whose values differ
// from the stock row's, the rows of new pairs and the rows of pairs the
// file repeats; every other pair keeps its row, upload_id and updated_at,
// and is counted in rows_unchanged. Seven hundred rows, unsorted, make
// several batches of a driver that compares a batch at a time, mostly
// unchanged in one file and mostly changed in another, with repeats whose
// first row was written and whose first row was not; a last file names a
// few rows far apart. A sold unit whose pair a file sets unchanged is
// released all the same.
func testUploadUnchanged(e *env) {
	const n = 700
	retail := storelink.Money(150)
	base := func(k int) storelink.StockRow {
		r := storelink.StockRow{StoreID: []string{"S1", "S2"}[k%2], EAN: fmt.Sprintf("%013d", 1000+k), ArticleNumber: fmt.Sprint("A-", k),
			Quantity: k % 40, Price: storelink.Money(100 + k), ArticleLocation: "Aisle 1", ProductName: "P"}
		if k%3 == 0 {
			r.RetailPrice = &retail
		}
		return r
	}
	// want is the row each pair should hold, and the upload that wrote it.
	want := map[string]storelink.StockRow{}
	wrote := map[string]string{}
	apply := func(rows []storelink.StockRow) *storelink.Upload {
		e.t.Helper()
		u := e.accept("x")
		c := e.claim("w", u)
		tx := e.beginUpload()
		_, _, err := e.lockUpload(tx, c)
		must(e.t, err)
		put := tx.StockWriter(e.ctx, e.writer(c))
		pairs := 0
		for _, r := range rows {
			must(e.t, put(r))
			if !r.Repeats {
				pairs++
			}
		}
		must(e.t, tx.ApplyStock(e.ctx))
		must(e.t, tx.ReleaseFulfilled(e.ctx))
		var finished *storelink.Upload
		must(e.t, finish(e, tx, c.ID, storelink.UploadApplied,
			storelink.FeedReport{RowsTotal: len(rows), RowsValid: len(rows), RowsApplied: pairs,
				Errors: []storelink.Problem{}, Warnings: []storelink.Problem{}}, e.tick(), &finished))
		must(e.t, tx.Commit(e.ctx))
		got, err := e.d.Uploads.GetUpload(e.ctx, c.ClientID, c.ID)
		must(e.t, err)
		if finished != nil {
			sameUpload(e.t, "upload as finished, and as read back", finished, got)
		}
		return got
	}
	check := func(what string, u *storelink.Upload, unchanged int) {
		e.t.Helper()
		if u.RowsUnchanged != unchanged {
			e.t.Fatalf("%s: rows_unchanged %d, want %d", what, u.RowsUnchanged, unchanged)
		}
		stock := e.stock(service.StockQuery{ClientID: e.client.ID, Limit: 2 * n})
		if len(stock) != len(want) {
			e.t.Fatalf("%s: %d stock rows, want %d", what, len(stock), len(want))
		}
		for _, s := range stock {
			k := s.StoreID + "/" + s.EAN
			if !reflect.DeepEqual(s.StockRow, want[k]) || s.UploadID != wrote[k] {
				e.t.Fatalf("%s: stock row %s = %+v of upload %s, want %+v of upload %s", what, k, s.StockRow, s.UploadID, want[k], wrote[k])
			}
		}
	}
	// feed applies rows, which the file gives in the order of order, and
	// checks what became of them.
	feed := func(what string, rows []storelink.StockRow, unchanged int) *storelink.Upload {
		e.t.Helper()
		u := apply(rows)
		for _, r := range rows {
			k := r.StoreID + "/" + r.EAN
			r.Repeats = false
			if !reflect.DeepEqual(want[k], r) || r.Repeats {
				wrote[k] = u.ID
			}
			want[k] = r
		}
		for _, r := range rows {
			if r.Repeats {
				wrote[r.StoreID+"/"+r.EAN] = u.ID
			}
		}
		check(what, u, unchanged)
		return u
	}

	// A first file: every pair is new. The rows come in no order of store
	// and EAN.
	var rows []storelink.StockRow
	for i := range n {
		rows = append(rows, base(i*37%n))
	}
	sold := storelink.StockRow{StoreID: "S1", EAN: eanA, ArticleNumber: "A", Quantity: 3, Price: 1999}
	feed("first file", append(rows, sold), 0)

	// The same file again with a unit of sold's pair fulfilled: one row in
	// seven with another quantity, one in eleven with another name, one in
	// thirteen without its retail price; two pairs repeated with the values
	// they hold, one with others.
	o := e.order("S1", eanA)
	o.State, o.Items[0].Status = storelink.StateFulfilled, storelink.ItemFulfilled
	e.insert(o)
	other := e.order("S2", eanB)
	other.State, other.Items[0].Status = storelink.StateFulfilled, storelink.ItemFulfilled
	e.insert(other)
	rows, unchanged := nil, 0
	for i := range n {
		k := i * 37 % n
		r := base(k)
		switch {
		case k%7 == 0:
			r.Quantity += 100
		case k%11 == 0:
			r.ProductName = "Q"
		case k%13 == 0 && r.RetailPrice == nil:
			r.RetailPrice = &retail
		case k == 3 || k == 300 || k == 650:
		default:
			unchanged++
		}
		rows = append(rows, r)
	}
	again := []storelink.StockRow{base(3), base(300), base(650)}
	again[1].Quantity++
	for i := range again {
		again[i].Repeats = true
	}
	feed("the file again, 1 row in 7, 11 and 13 changed", append(append(rows, sold), again...), unchanged+1)
	for _, c := range []struct {
		o         *storelink.Order
		reserving bool
	}{{o, false}, {other, true}} {
		got, err := e.d.Orders.GetOrder(e.ctx, c.o.ID)
		must(e.t, err)
		if got.Items[0].Reserving != c.reserving {
			e.t.Fatalf("sold unit at %s reserving = %v after a file that set its pair unchanged (S1) or not at all (S2), want %v",
				c.o.StoreID, got.Items[0].Reserving, c.reserving)
		}
	}

	// A file whose first 400 rows all differ and whose last 300 do not, in
	// store and EAN order; repeated at its end are a pair of each part.
	rows, unchanged = nil, 0
	for k := range n {
		r := want[base(k).StoreID+"/"+base(k).EAN]
		if k < 400 {
			r.Price += 5
		} else if k != 500 {
			unchanged++
		}
		rows = append(rows, r)
	}
	again = []storelink.StockRow{rows[10], rows[500]}
	for i := range again {
		again[i].Repeats = true
	}
	feed("a file of 400 changed rows, then 300 unchanged", append(rows, again...), unchanged)

	// A file of three rows far apart in one store's stock, one of them
	// changed: a driver that scans ranges of EANs has most of the store
	// between them.
	rows = nil
	for _, k := range []int{0, 350, 698} {
		rows = append(rows, want[base(k).StoreID+"/"+base(k).EAN])
	}
	rows[1].Quantity++
	feed("three rows far apart", rows, 2)

	// A file whose EANs are not all GTINs, in no order, one of them
	// repeated, beside a row held as it is: a driver that packs EANs keeps
	// the others as they are.
	rows = []storelink.StockRow{
		{StoreID: "S2", EAN: "X-2", ArticleNumber: "X", Quantity: 1, Price: 100},
		{StoreID: "S1", EAN: "123456789012345", ArticleNumber: "L", Quantity: 2, Price: 200},
		want[base(4).StoreID+"/"+base(4).EAN],
		{StoreID: "S1", EAN: "X-1", ArticleNumber: "X", Quantity: 3, Price: 300},
		{StoreID: "S1", EAN: "0000000001000", ArticleNumber: "Z", Quantity: 4, Price: 400},
		{StoreID: "S2", EAN: "X-2", ArticleNumber: "X", Quantity: 5, Price: 500, Repeats: true},
	}
	feed("EANs that are not GTINs", rows, 1)
}
