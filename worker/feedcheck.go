package worker

import (
	"errors"
	"fmt"
	"runtime/debug"

	"storelink"
	"storelink/feed"
)

// Rows are handed from the check to the writer in batches of checkBatch, with
// up to checkDepth batches in flight: enough to keep both sides busy, little
// enough (about a megabyte) not to matter for memory.
const (
	checkBatch = 512
	checkDepth = 4
)

// errorFileLimit bounds a file's error file: twice the file, at least one
// and at most two mebibytes, beyond which its last line says how many
// dropped rows it leaves out. Every dropped row of a small file with up to
// about half its rows bad fits; a file of short rows that are all bad, each
// given a long message, is cut there rather than grown to fifty times its
// size. The error file is made while the file is applied, in the apply's
// transaction: a 10 MiB file of bad rows made an error file of 20 MiB in
// 0.45 s (against 0.08 s at 2 MiB), while every other writer of an
// embedded database waited (bench/hostile csv-errors).
func errorFileLimit(size int64) int { return int(min(max(1<<20, 2*size), maxErrorFile)) }

// maxErrorFile is the largest error file.
const maxErrorFile = 2 << 20

// errStopped ends the check when the writer has stopped taking rows.
var errStopped = errors.New("the writer stopped")

// checkInBackground runs feed.Check on a goroutine of its own and calls put on the
// caller's goroutine, the one that holds the apply transaction, so that
// decoding and checking the next rows overlaps with writing the earlier
// ones, and an import takes about as long as its database writes. put sees the same rows in the same (file) order as
// when Check calls it directly. A panic in the check comes back as an error.
// It is the file's last read: body's pieces are let go as they are checked
// (Chunks.Drain), so that the writer's rows take the place of the file's
// bytes in memory rather than being added to them.
func checkInBackground(body storelink.Chunks, stores map[string]bool, put func(storelink.StockRow) error) (storelink.FeedReport, error) {
	full := make(chan []storelink.StockRow, checkDepth)
	free := make(chan []storelink.StockRow, checkDepth+1)
	stop := make(chan struct{})
	type result struct {
		report storelink.FeedReport
		err    error
	}
	done := make(chan result, 1)
	go func() {
		var res result
		defer func() {
			if r := recover(); r != nil {
				res.err = fmt.Errorf("panic while checking: %v\n%s", r, debug.Stack())
			}
			close(full)
			done <- res
		}()
		batch := make([]storelink.StockRow, 0, checkBatch)
		send := func() error {
			select {
			case full <- batch:
			case <-stop:
				return errStopped
			}
			select {
			case batch = <-free:
			default:
				batch = make([]storelink.StockRow, 0, checkBatch)
			}
			return nil
		}
		res.report, res.err = feed.CheckWithErrorFile(body.Drain(), stores, func(r storelink.StockRow) error {
			if batch = append(batch, r); len(batch) == checkBatch {
				return send()
			}
			return nil
		}, errorFileLimit(body.Len()))
		if res.err == nil && len(batch) > 0 {
			res.err = send()
		}
	}()

	// Whatever ends the writing (an error of put, a panic), the checker is
	// told to stop, so that it never blocks on a full channel; it then ends
	// at the next row it would hand over.
	var putErr error
	stopped := false
	defer func() {
		if !stopped {
			close(stop)
		}
	}()
	for batch := range full {
		for i := range batch {
			if putErr = put(batch[i]); putErr != nil {
				putErr = fmt.Errorf("put stock row of line %d: %w", batch[i].Line, putErr)
				break
			}
		}
		if putErr != nil {
			close(stop)
			stopped = true
			break
		}
		clear(batch) // let the rows' strings go
		free <- batch[:0]
	}
	res := <-done
	if putErr != nil {
		return res.report, putErr
	}
	return res.report, res.err
}
