package sqlite

import (
	"testing"
	"time"

	"storelink/service"
	"storelink/service/drivertest"
)

// TestDriverSmallStockWindow runs the driver suite with windows of a few
// rows and bytes, so that its stock cases (hundreds of rows, unsorted,
// repeats of pairs put windows earlier) cross many windows: what an apply
// writes and counts unchanged must not depend on where a window ends.
func TestDriverSmallStockWindow(t *testing.T) {
	rows, bytes := stockWindow, stockWindowBytes
	stockWindow, stockWindowBytes = 50, 2000
	t.Cleanup(func() { stockWindow, stockWindowBytes = rows, bytes })
	drivertest.Exercise(t, func(t *testing.T) (service.Drivers, *service.Services) {
		db := OpenFixture(t, time.Now)
		return NewDrivers(db.DB), db.Services()
	})
}
