package sqlite

import (
	"cmp"
	"strings"
	"testing"
	"time"

	"storelink/service"
	"storelink/service/drivertest"
)

// TestDriverSmallStockWindow runs the driver suite with windows of a few
// rows and bytes, so that its stock cases (hundreds of rows, unsorted,
// repeats of pairs put windows earlier) cross many windows, and the
// windows of unsorted files many runs: what an apply writes and counts
// unchanged must not depend on where a window or a run ends.
func TestDriverSmallStockWindow(t *testing.T) {
	rows, bytes := stockWindow, stockWindowBytes
	stockWindow, stockWindowBytes = 20, 4000
	t.Cleanup(func() { stockWindow, stockWindowBytes = rows, bytes })
	drivertest.Exercise(t, func(t *testing.T) (service.Drivers, *service.Services) {
		db := OpenFixture(t, time.Now)
		return NewDrivers(db.DB), db.Services()
	})
}

// TestEANKey checks that the window's packed EANs order as the stock
// table's text does and turn back into the same text, leading zeros and
// all, and that what is not 1 to 14 digits is not packed.
func TestEANKey(t *testing.T) {
	eans := []string{"0", "9", "00", "01", "012", "0120", "1", "10", "12", "120", "1200", "12000000000000",
		"4006381333931", "04006381333931", "40063813", "99999999999999", "00000000000000", "5012345678900"}
	w := &stockWriter{}
	for _, a := range eans {
		ka, ok := eanKey(a)
		if !ok {
			t.Fatalf("eanKey(%q) not packed", a)
		}
		if got := w.eanOf(ka); got != a {
			t.Errorf("eanOf(eanKey(%q)) = %q", a, got)
		}
		for _, b := range eans {
			kb, _ := eanKey(b)
			if got, want := cmp.Compare(ka, kb), strings.Compare(a, b); got != want {
				t.Errorf("%q against %q: keys compare %d, texts %d", a, b, got, want)
			}
		}
	}
	for _, bad := range []string{"", "123456789012345", "12a4", " 1", "-1"} {
		if _, ok := eanKey(bad); ok {
			t.Errorf("eanKey(%q) packed", bad)
		}
	}
}
