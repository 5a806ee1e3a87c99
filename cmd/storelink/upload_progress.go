package main

import (
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress shows how much of the file has been sent: a bar on a terminal,
// a plain line every few seconds otherwise (a log has no use for a bar).
type progress interface {
	reader(io.Reader) io.Reader
	done(ok bool)
}

func (u *uploader) newProgress(size int64) progress {
	if u.tty && size > 0 {
		// One unit more than the file: the service's answer. The bar stays
		// at the last bytes sent while the service reads and stores them,
		// and ends with the answer.
		return &barProgress{name: u.cfg.Name, stop: make(chan struct{}), bar: progressbar.NewOptions64(size+1,
			progressbar.OptionSetWriter(u.stderr),
			progressbar.OptionSetDescription(u.cfg.Name),
			progressbar.OptionShowBytes(true),
			progressbar.OptionShowTotalBytes(true),
			progressbar.OptionShowCount(),
			progressbar.OptionUseIECUnits(true),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)}
	}
	return &lineProgress{w: u.stderr, total: size, every: 5 * time.Second, last: time.Now()}
}

type barProgress struct {
	name string
	bar  *progressbar.ProgressBar
	sent sync.Once
	stop chan struct{}
}

func (p *barProgress) reader(r io.Reader) io.Reader {
	pr := progressbar.NewReader(r, p.bar)
	return readerFunc(func(b []byte) (int, error) {
		n, err := pr.Read(b)
		if err == io.EOF {
			p.sent.Do(p.waiting)
		}
		return n, err
	})
}

// waiting says, once the whole file is read, that the service is being
// waited for, and redraws the bar while it is, so that its clock goes on:
// the bar draws only when bytes are added, and none are any more.
func (p *barProgress) waiting() {
	p.bar.Describe(p.name + ": sent, waiting for the service")
	go func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				_ = p.bar.Add64(0)
			}
		}
	}()
}

func (p *barProgress) done(ok bool) {
	close(p.stop)
	if ok {
		_ = p.bar.Finish() // clears the bar
		return
	}
	_ = p.bar.Exit() // no more drawing, even if the body is still being read
	_ = p.bar.Clear()
}

type lineProgress struct {
	w          io.Writer
	total      int64
	every      time.Duration
	mu         sync.Mutex
	sent       int64
	last       time.Time
	terminated bool
}

func (p *lineProgress) reader(r io.Reader) io.Reader { return readerFunc(p.read(r)) }

func (p *lineProgress) read(r io.Reader) func([]byte) (int, error) {
	return func(b []byte) (int, error) {
		n, err := r.Read(b)
		p.mu.Lock()
		defer p.mu.Unlock()
		p.sent += int64(n)
		if !p.terminated && p.sent < p.total && time.Since(p.last) >= p.every {
			p.last = time.Now()
			fmt.Fprintf(p.w, "sent %s of %s (%d%%)\n", formatBytes(p.sent), formatBytes(p.total), p.sent*100/p.total)
		}
		return n, err
	}
}

func (p *lineProgress) done(bool) {
	p.mu.Lock()
	p.terminated = true
	p.mu.Unlock()
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(b []byte) (int, error) { return f(b) }

func isTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

// formatBytes is a size for people: 512 B, 1.5 KiB, 10.0 MiB.
func formatBytes(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	v, unit := float64(n)/1024, "KiB"
	for _, u := range []string{"MiB", "GiB", "TiB"} {
		if v < 1024 {
			break
		}
		v, unit = v/1024, u
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}
