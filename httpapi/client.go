package httpapi

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"storelink"
)

// Client calls the partner stock API the way a partner would;
// `storelink upload` is built on it. It speaks only the wire format, so it
// works against any storelink service, not just this build.
type Client struct {
	// BaseURL is the stock base URL, http(s)://HOST/stock, without a
	// trailing slash.
	BaseURL  string
	ClientID string
	APIKey   string
	// HTTP sends the requests. Uploads may run for minutes on a slow link,
	// so it has no overall timeout; NewClient gives it timeouts per phase
	// instead, and the status calls carry their own deadline.
	HTTP *http.Client
	// StatusTimeout bounds one status call.
	StatusTimeout time.Duration
}

// NewClient returns a client for the stock base URL base. A URL with an
// empty path (http://HOST) is taken to mean the service root, and /stock is
// appended, so that partners can paste either.
func NewClient(base, clientID, apiKey string) (*Client, error) {
	b, err := StockBaseURL(base)
	if err != nil {
		return nil, err
	}
	return &Client{BaseURL: b, ClientID: clientID, APIKey: apiKey, HTTP: newHTTPClient(), StatusTimeout: 30 * time.Second}, nil
}

// StockBaseURL checks and normalizes a stock base URL: http or https, a host,
// no query; an empty path becomes /stock.
func StockBaseURL(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	switch {
	case err != nil:
		return "", fmt.Errorf("%q is not a URL: %v", raw, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("%q is not an http or https URL; give the stock base URL like https://HOST/stock", raw)
	case u.Host == "":
		return "", fmt.Errorf("%q has no host", raw)
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return "", fmt.Errorf("%q: the base URL takes no query, fragment or user info", raw)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	if u.Path == "" {
		u.Path = "/stock"
	}
	return u.String(), nil
}

// newHTTPClient has a timeout for every phase but the transfer itself.
// Large uploads ask for "100-continue", so that a refusal (429, 413, 401)
// arrives before the body is sent rather than after.
func newHTTPClient() *http.Client {
	t := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 2 * time.Minute, // the service commits the file durably before it answers
		ExpectContinueTimeout: 2 * time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   2,
		ForceAttemptHTTP2:     true,
	}
	return &http.Client{Transport: t}
}

// UploadReceipt is the answer to an accepted upload, with the
// client's capacity as the RateLimit header reported it.
type UploadReceipt struct {
	UploadID   string                 `json:"upload_id"`
	ClientID   string                 `json:"client_id"`
	FileName   string                 `json:"file_name"`
	SizeBytes  int64                  `json:"size_bytes"`
	SHA256     string                 `json:"sha256"`
	Status     storelink.UploadStatus `json:"status"`
	ReceivedAt time.Time              `json:"received_at"`
	StatusURL  string                 `json:"status_url"`
	// CapacityLeft is the bytes the client may still send in this window,
	// or -1 when the answer did not say.
	CapacityLeft int64 `json:"-"`
}

// APIError is an error answer of the service, decoded from its
// problem+json body (or made up from the status when the answer came from
// something else, like a proxy).
type APIError struct {
	StatusCode int
	Type       string
	Title      string
	Detail     string
	// RetryAfter is the wait the answer asked for (Retry-After on 429 and
	// 503); zero when it named none.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("%d %s", e.StatusCode, e.Title)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Code is the storelink error code of the problem type
// ("/problems/rate_limited" gives storelink.ERATELIMIT), or "" for an
// answer that was not a storelink problem.
func (e *APIError) Code() string {
	code, ok := strings.CutPrefix(e.Type, "/problems/")
	if !ok {
		return ""
	}
	return code
}

// Retryable tells whether the same request may succeed after RetryAfter.
func (e *APIError) Retryable() bool {
	return (e.StatusCode == http.StatusTooManyRequests || e.StatusCode == http.StatusServiceUnavailable) && e.RetryAfter > 0
}

// PutStock sends a stock file as name. body is read once, to its end; size
// is its length, sent as Content-Length so that the service can refuse a
// file that cannot fit before it is sent. To retry, call again with a fresh
// reader.
func (c *Client) PutStock(ctx context.Context, name string, body io.Reader, size int64) (*UploadReceipt, error) {
	if size == 0 {
		body = http.NoBody
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, c.UploadURL(name), body)
	if err != nil {
		return nil, err
	}
	req.ContentLength = size
	return c.putStock(req, size)
}

// PutStockGzip sends a stock file as name, compressed with gzip on the way
// (Content-Encoding: gzip). body is the file itself, read once, to its
// end; size is its length, used only to decide whether to ask the service
// before sending (Expect: 100-continue), since the compressed length is
// known only once sent. To retry, call again with a fresh reader.
func (c *Client) PutStockGzip(ctx context.Context, name string, body io.Reader, size int64) (*UploadReceipt, error) {
	pr, pw := io.Pipe()
	go func() {
		// Speed over ratio: a CSV feed shrinks to a fraction at any level,
		// and the sender should not wait on the compressor.
		zw, _ := gzip.NewWriterLevel(pw, gzip.BestSpeed)
		_, err := io.Copy(zw, body)
		if err == nil {
			err = zw.Close()
		}
		// A request that ended early (an answer before the body was read)
		// closed pr: the copy stops at its next write.
		pw.CloseWithError(err)
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, c.UploadURL(name), pr)
	if err != nil {
		pr.Close()
		return nil, err
	}
	req.ContentLength = -1
	req.Header.Set("Content-Encoding", "gzip")
	return c.putStock(req, size)
}

// putStock sends an upload request whose body is set and reads the receipt.
func (c *Client) putStock(req *http.Request, size int64) (*UploadReceipt, error) {
	req.Header.Set("Content-Type", "application/csv")
	req.Header.Set("Cache-Control", "no-cache")
	if size > 64<<10 {
		req.Header.Set("Expect", "100-continue")
	}
	var r UploadReceipt
	h, err := c.do(req, &r)
	if err != nil {
		return nil, err
	}
	r.CapacityLeft = rateLimitRemaining(h.Get("RateLimit"))
	return &r, nil
}

// Upload returns an upload with its processing report.
func (c *Client) Upload(ctx context.Context, uploadID string) (*storelink.Upload, error) {
	var u storelink.Upload
	if err := c.getJSON(ctx, c.UploadStatusURL(uploadID), &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// WaitUpload polls an upload until it is applied or rejected, first often
// (processing usually takes well under a second), then every few seconds.
// Each poll is passed to seen, which may be nil. It fails only when ctx
// ends or a poll fails with anything but 429 or 503.
func (c *Client) WaitUpload(ctx context.Context, uploadID string, seen func(*storelink.Upload)) (*storelink.Upload, error) {
	wait := 100 * time.Millisecond
	for {
		u, err := c.Upload(ctx, uploadID)
		var ae *APIError
		switch {
		case err == nil && u.Status.Final():
			return u, nil
		case err == nil:
			if seen != nil {
				seen(u)
			}
		case errors.As(err, &ae) && ae.Retryable():
			wait = max(wait, ae.RetryAfter)
		default:
			return nil, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		wait = min(wait*3/2, 3*time.Second)
	}
}

// UploadURL is where a file named name is PUT.
func (c *Client) UploadURL(name string) string {
	return c.BaseURL + "/" + url.PathEscape(c.ClientID) + "/" + url.PathEscape(name)
}

// UploadStatusURL is where an upload's status is read.
func (c *Client) UploadStatusURL(uploadID string) string {
	return c.BaseURL + "/" + url.PathEscape(c.ClientID) + "/uploads/" + url.PathEscape(uploadID)
}

func (c *Client) getJSON(ctx context.Context, u string, v any) error {
	if c.StatusTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.StatusTimeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	_, err = c.do(req, v)
	return err
}

// UploadErrorFile writes the error file of a processed upload
// (errors.csv: every row it dropped, as it stood in the file, with its
// line and problems) to w, as it arrives.
func (c *Client) UploadErrorFile(ctx context.Context, uploadID string, w io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.UploadStatusURL(uploadID)+"/errors.csv", nil)
	if err != nil {
		return err
	}
	req.Header.Set("x-api-key", c.APIKey)
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return DecodeProblem(resp)
	}
	_, err = io.Copy(w, resp.Body)
	return err
}

// maxAnswer bounds what is read of an answer: a report is at most a few
// thousand line references per problem type.
const maxAnswer = 64 << 20

// do sends req with the key, and decodes a 2xx answer into v or returns
// the *APIError of any other.
func (c *Client) do(req *http.Request, v any) (http.Header, error) {
	req.Header.Set("x-api-key", c.APIKey)
	req.Header.Set("Accept", "application/json, application/problem+json")
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.Header, DecodeProblem(resp)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(v); err != nil {
		return resp.Header, fmt.Errorf("%s %s: %d answer is not the expected JSON: %v", req.Method, req.URL.Redacted(), resp.StatusCode, err)
	}
	return resp.Header, nil
}

// DecodeProblem turns an error answer into an *APIError. A problem+json (or
// JSON) body gives type, title and detail; any other body gives at most a
// short, printable excerpt as detail, so that an HTML error page of a proxy
// is still shown as something a person can read.
func DecodeProblem(resp *http.Response) *APIError {
	e := &APIError{StatusCode: resp.StatusCode, Title: http.StatusText(resp.StatusCode)}
	if e.Title == "" {
		e.Title = "Status " + strconv.Itoa(resp.StatusCode)
	}
	e.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<10))
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "application/problem+json" || mt == "application/json" {
		var p Problem
		if json.Unmarshal(b, &p) == nil {
			e.Type, e.Detail = p.Type, p.Detail
			if p.Title != "" {
				e.Title = p.Title
			}
			return e
		}
	}
	e.Detail = excerpt(string(b), 200)
	return e
}

// parseRetryAfter reads whole seconds or an HTTP date (RFC 9110 10.2.3).
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0
		}
		return time.Duration(min(n, 1<<31)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now).Round(time.Second)
	}
	return 0
}

// rateLimitRemaining reads r= of a RateLimit header ("upload";r=1048576;t=42),
// or -1.
func rateLimitRemaining(v string) int64 {
	for _, part := range strings.Split(v, ";") {
		if s, ok := strings.CutPrefix(strings.TrimSpace(part), "r="); ok {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}

// excerpt is the start of s on one line, without control characters.
func excerpt(s string, n int) string {
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n]) + "…"
	}
	return s
}
