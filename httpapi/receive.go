package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"

	"storelink"
	"storelink/gcmode"
)

// A stock file comes in two ways: as the body of PUT /stock/{client_id}/{file}
// (handleUpload), or as the file of the portal's upload form (ReceiveUpload,
// which the dashboard calls). Both pass the same checks, hold the same
// places (a slot among the partner's uploads in flight, the memory of the
// upload memory in the partner's share) and are accepted by receive.

// formOverhead is what a form's multipart framing and its other fields
// (the CSRF token) add at most to the file it carries: a form's
// Content-Length beyond the largest file size and this cannot carry a
// file that fits.
const formOverhead = 64 << 10

// ReceiveUpload receives a stock file of client c that the portal's upload
// form sends: name is the file's name as chosen, file its bytes, read from
// r's multipart body. A name ending in .gz is a gzip file, kept under its
// name without the .gz; its limits count the CSV bytes, as the API's do.
// It holds one of the partner's slots of uploads in flight while it runs,
// and answers the same errors as PUT /stock/{client_id}/{file}. r must be
// a request s serves (the dashboard is mounted in it); the request to go
// on with is returned, as OutsideDB returns it.
func (s *Server) ReceiveUpload(r *http.Request, c *storelink.Client, name string, file io.Reader) (*storelink.Upload, *http.Request, error) {
	release, err := s.takeInFlight(c.PartnerID)
	if err != nil {
		return nil, r, err
	}
	defer release()
	if r.ContentLength > s.MaxFileSize+formOverhead {
		return nil, r, tooLarge(s.MaxFileSize)
	}
	if err := s.checkWaiting(r.Context(), c.ID); err != nil {
		return nil, r, err
	}
	csvName, gz := name, false
	if n := len(name); n > 3 && strings.EqualFold(name[n-3:], ".gz") {
		csvName, gz = name[:n-3], true
	}
	if err := checkFileName(csvName); err != nil {
		return nil, r, err
	}
	u, _, r, err := s.receive(r, c, csvName, formCSV(file, gz))
	return u, r, err
}

// receive reads a stock file of client c whose checks before the body
// passed, and accepts it: reading is no database phase (OutsideDB), the
// body timeout bounds it. It returns the client's capacity after the
// accept, when the accept got that far, and the request to go on with.
func (s *Server) receive(r *http.Request, c *storelink.Client, name string, src csvSource) (*storelink.Upload, storelink.Capacity, *http.Request, error) {
	// The body is in memory until it is stored: while a large one is,
	// garbage is collected eagerly (gcmode).
	var body storelink.Chunks
	var sum string
	var err error
	release := func() {}
	defer func() { release() }()
	r = OutsideDB(r, func(context.Context) {
		body, sum, release, err = receiveCSV(src, s.MaxFileSize, s.GC, s.uploadMemory, c.PartnerID)
	})
	if err != nil {
		return nil, storelink.Capacity{}, r, err
	}
	ctx := r.Context()
	u, after, err := s.Uploads.Accept(ctx, storelink.NewUpload{ClientID: c.ID, FileName: name, Body: body, SHA256: sum}, s.Capacity)
	if err != nil {
		return nil, after, r, s.refusedWaiting(ctx, c.ID, err)
	}
	s.health.wrote()
	s.bytesIn.Add(float64(u.SizeBytes))
	s.Accepted()
	return u, after, r, nil
}

// readBody reads the CSV file of a request's body (receiveCSV).
func readBody(r *http.Request, max int64, gc *gcmode.Governor, mem *uploadMemory, partner string) (body storelink.Chunks, sum string, release func(), err error) {
	return receiveCSV(requestCSV(r), max, gc, mem, partner)
}

// receiveCSV reads a stock file, at most max bytes of it, and hashes them
// on the way; a gzip file is decompressed as it is read, and max and the
// hash are of the CSV bytes. Memory follows the bytes that arrive, never
// the declared length: a client can declare any length and send nothing.
// The memory is reserved in mem, in partner's share, as it grows
// (unbounded when mem is nil); a file that does not fit is refused, before
// it is read when its declared length already cannot.
// release gives the memory back and ends the eager collection
// (gc.HoldLarge) that starts once the body is large; it is to be called
// when the body is no longer in memory, and also after an error.
func receiveCSV(src csvSource, max int64, gc *gcmode.Governor, mem *uploadMemory, partner string) (body storelink.Chunks, sum string, release func(), err error) {
	if src.declared > max {
		return nil, "", func() {}, tooLarge(max)
	}
	if mem != nil && src.declared > 0 {
		if err := mem.fits(partner, src.declared); err != nil {
			return nil, "", func() {}, err
		}
	}
	buf := &bodyBuffer{limit: max, max: max, mem: mem, partner: partner, gc: gc}
	if src.declared > 0 {
		buf.limit = src.declared
	}
	csv, err := src.csvReader(max)
	if err != nil {
		return nil, "", func() {}, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(buf, h), io.LimitReader(csv, max+1))
	if err != nil {
		return nil, "", buf.done, src.readError(err)
	}
	if n > max {
		return nil, "", buf.done, tooLarge(max)
	}
	if n == 0 {
		return nil, "", buf.done, src.emptyError()
	}
	if err := src.notGzipped(buf.chunks[0]); err != nil {
		return nil, "", buf.done, err
	}
	return buf.chunks, hex.EncodeToString(h.Sum(nil)), buf.done, nil
}
