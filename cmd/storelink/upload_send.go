package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"storelink"
	"storelink/httpapi"
)

// uploader is one run of `storelink upload`.
type uploader struct {
	cfg    *uploadConfig
	client *httpapi.Client
	stdout io.Writer
	stderr io.Writer
	tty    bool // stderr is a terminal: draw a progress bar
}

func (u *uploader) run(ctx context.Context) (int, error) {
	client, err := httpapi.NewClient(u.cfg.URL, u.cfg.ClientID, u.cfg.APIKey)
	if err != nil {
		return 2, usageError{fmt.Errorf("--url: %v", err)}
	}
	u.client = client
	f, err := os.Open(u.cfg.File)
	if err != nil {
		return 2, usageError{err}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 2, usageError{err}
	}
	if !st.Mode().IsRegular() {
		return 2, usageError{fmt.Errorf("%s is not a regular file", u.cfg.File)}
	}

	fmt.Fprintf(u.stderr, "uploading %s: %s to %s\n", u.cfg.Name, formatBytes(st.Size()), u.client.UploadURL(u.cfg.Name))
	r, code, err := u.send(ctx, f, st.Size())
	if r == nil {
		return code, err
	}
	left := ""
	if r.CapacityLeft >= 0 {
		left = "; capacity left " + formatBytes(r.CapacityLeft)
	}
	fmt.Fprintf(u.stderr, "accepted %s: upload_id=%s sha256=%s%s\n", r.FileName, r.UploadID, r.SHA256, left)
	if !u.cfg.Wait {
		return 0, writeJSONLine(u.stdout, r)
	}
	return u.wait(ctx, r)
}

// send PUTs the file, waiting and sending again while the answer is 429
// (or 503 with a Retry-After), within --max-wait in all. It returns the
// receipt, or an exit code with the reason already printed, or an error.
func (u *uploader) send(ctx context.Context, f *os.File, size int64) (*httpapi.UploadReceipt, int, error) {
	var waited time.Duration
	for {
		p := u.newProgress(size)
		h := sha256.New()
		file := p.reader(io.TeeReader(io.NewSectionReader(f, 0, size), h))
		var r *httpapi.UploadReceipt
		var err error
		if u.cfg.Gzip {
			r, err = u.client.PutStockGzip(ctx, u.cfg.Name, file, size)
		} else {
			r, err = u.client.PutStock(ctx, u.cfg.Name, file, size)
		}
		p.done(err == nil)
		if err == nil {
			// The service hashed what it stored; a difference means the
			// file changed while it was sent, or was altered on the way.
			if sum := hex.EncodeToString(h.Sum(nil)); r.SHA256 != "" && r.SHA256 != sum {
				return nil, 2, fmt.Errorf("upload %s was stored with sha256 %s, but the bytes sent have %s; send the file again", r.UploadID, r.SHA256, sum)
			}
			return r, 0, nil
		}
		if ctx.Err() != nil {
			return nil, 2, errors.New("interrupted before the service answered")
		}
		var ae *httpapi.APIError
		if !errors.As(err, &ae) {
			return nil, 2, fmt.Errorf("sending %s: %w", u.cfg.Name, err)
		}
		switch {
		case ae.Retryable():
			d := ae.RetryAfter
			if waited+d > u.cfg.MaxWait {
				fmt.Fprintf(u.stderr, "storelink upload: not sent: %v\nstorelink upload: the service asks to wait %s more, which would exceed --max-wait %s; try again later\n",
					ae, d, u.cfg.MaxWait)
				if ae.StatusCode == http.StatusServiceUnavailable {
					return nil, 2, nil
				}
				return nil, 1, nil
			}
			what := "capacity used up"
			switch {
			case ae.StatusCode == http.StatusServiceUnavailable:
				what = "service unavailable"
			case ae.Code() == storelink.EBACKLOG:
				what = "too many uploads of this client wait to be processed"
			}
			fmt.Fprintf(u.stderr, "%s; retrying in %d s\n", what, int64(d.Round(time.Second)/time.Second))
			if err := sleep(ctx, d); err != nil {
				return nil, 2, errors.New("interrupted while waiting to send again; nothing was sent")
			}
			waited += d
		case ae.StatusCode == http.StatusInsufficientStorage:
			fmt.Fprintf(u.stderr, "storelink upload: not sent: %v\nstorelink upload: the service has no space left to store files; nothing was stored. Try again later; if it lasts, tell the marketplace\n", ae)
			return nil, 2, nil
		case ae.StatusCode == http.StatusUnauthorized:
			return nil, 2, usageError{fmt.Errorf("the service refused the credentials (%v); check --client-id and --api-key (STORELINK_CLIENT_ID, STORELINK_API_KEY)", ae)}
		case ae.StatusCode == http.StatusForbidden:
			return nil, 2, usageError{fmt.Errorf("the API key is valid but not for client %s (%v); use the key of this client", u.cfg.ClientID, ae)}
		case ae.StatusCode == http.StatusNotFound || ae.StatusCode == http.StatusMethodNotAllowed:
			return nil, 2, usageError{fmt.Errorf("no stock upload at %s (%v); check --url: it is the stock base URL, like https://HOST/stock", u.client.UploadURL(u.cfg.Name), ae)}
		case ae.StatusCode == http.StatusBadRequest || ae.StatusCode == http.StatusRequestEntityTooLarge || ae.StatusCode == http.StatusUnsupportedMediaType:
			fmt.Fprintf(u.stderr, "storelink upload: refused: %s was not accepted: %v\n", u.cfg.Name, ae)
			return nil, 1, nil
		default:
			return nil, 2, fmt.Errorf("sending %s: %w", u.cfg.Name, ae)
		}
	}
}

// wait polls until the upload is final and prints its report.
func (u *uploader) wait(ctx context.Context, r *httpapi.UploadReceipt) (int, error) {
	fmt.Fprintf(u.stderr, "waiting for processing of upload %s\n", r.UploadID)
	wctx, cancel := context.WithTimeout(ctx, u.cfg.WaitTimeout)
	defer cancel()
	last := storelink.UploadAccepted
	final, err := u.client.WaitUpload(wctx, r.UploadID, func(up *storelink.Upload) {
		if up.Status != last {
			last = up.Status
			fmt.Fprintf(u.stderr, "upload %s is %s\n", up.ID, up.Status)
		}
	})
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return 2, fmt.Errorf("interrupted; upload %s was accepted and is processed anyway; its status: %s", r.UploadID, u.client.UploadStatusURL(r.UploadID))
	case wctx.Err() != nil:
		return 2, fmt.Errorf("upload %s is still %s after --wait-timeout %s; its status: %s", r.UploadID, last, u.cfg.WaitTimeout, u.client.UploadStatusURL(r.UploadID))
	default:
		return 2, fmt.Errorf("reading the status of upload %s: %w", r.UploadID, err)
	}
	code := 0
	if final.Status != storelink.UploadApplied || len(final.Errors) > 0 {
		code = 1
	}
	if u.cfg.ErrorsTo != "" {
		if err := u.saveErrors(ctx, final); err != nil {
			return 2, err
		}
	}
	if u.cfg.JSON {
		return code, writeJSONLine(u.stdout, final)
	}
	writeReport(u.stdout, final)
	return code, nil
}

// saveErrors writes the upload's error file to --errors-to.
func (u *uploader) saveErrors(ctx context.Context, final *storelink.Upload) error {
	if final.Status == storelink.UploadCancelled {
		fmt.Fprintf(u.stderr, "upload %s was cancelled: it has no error file; %s not written\n", final.ID, u.cfg.ErrorsTo)
		return nil
	}
	f, err := os.Create(u.cfg.ErrorsTo)
	if err != nil {
		return fmt.Errorf("--errors-to: %w", err)
	}
	err = u.client.UploadErrorFile(ctx, final.ID, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(u.cfg.ErrorsTo) // not a file that looks whole and is not
		return fmt.Errorf("reading the error file of upload %s into %s: %w", final.ID, u.cfg.ErrorsTo, err)
	}
	fmt.Fprintf(u.stderr, "error file saved to %s\n", u.cfg.ErrorsTo)
	return nil
}

// writeJSONLine prints v as the service answers it, times included.
func writeJSONLine(w io.Writer, v any) error {
	return httpapi.EncodeJSON(w, v)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
