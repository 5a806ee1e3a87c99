package httpapi

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
)

// A request with both Content-Length and Transfer-Encoding (or with
// Transfer-Encoding on HTTP/1.0) has two framings; a proxy in front that
// reads the other one than net/http sees a different next request (request
// smuggling). RFC 9112 section 6.1 lets a server refuse it and asks that
// the connection be closed. net/http takes the Transfer-Encoding and drops
// the Content-Length header before the handler sees the request, so the
// raw bytes are watched here instead: framingConn follows the framing of
// each request on its connection (headers, then the body by its length or
// its chunks) and marks the connection when a header section holds both.
// It only watches; net/http still parses everything, and where the two
// would disagree net/http refuses the request and closes the connection.

// Listener wraps ln so that ServeHTTP can refuse requests of ambiguous
// framing; the http.Server must use ConnContext with it.
func Listener(ln net.Listener) net.Listener { return watchListener{ln} }

// ConnContext is the http.Server's ConnContext for a Listener.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if fc, ok := c.(*framingConn); ok {
		return context.WithValue(ctx, framingKey{}, fc)
	}
	return ctx
}

type framingKey struct{}

// ambiguousFraming tells whether the connection of r has carried a
// request of ambiguous framing.
func ambiguousFraming(r *http.Request) bool {
	fc, ok := r.Context().Value(framingKey{}).(*framingConn)
	return ok && fc.ambiguous.Load()
}

type watchListener struct{ net.Listener }

func (l watchListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &framingConn{Conn: c, f: framing{state: stRequestLine}}, nil
}

type framingConn struct {
	net.Conn
	f         framing // only the reading goroutine touches it
	ambiguous atomic.Bool
}

func (c *framingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.f.state != stLost {
		if c.f.feed(p[:n]) {
			c.ambiguous.Store(true)
		}
	}
	return n, err
}

const (
	stRequestLine = iota
	stHeader
	stBody
	stChunkSize
	stChunkData
	stChunkEnd
	stTrailer
	stLost // not followed any further (net/http refuses or closes)
)

// Lines longer than these cannot be what is looked for: net/http refuses
// a chunk-size line of more than 4096 bytes, and the names and values that
// matter here are short. Only this much of a line is kept.
const (
	maxKeep      = 64
	maxChunkLine = 4096
)

// framing is where a connection's byte stream stands: in which part of
// which request, and what its header section has said so far.
type framing struct {
	state  int
	remain int64 // bytes of body or chunk data still to come

	// The line being read. For a header line, name is kept until the
	// colon and value after it (leading blanks skipped), each up to
	// maxKeep; long marks a line whose kept part is not all of it.
	lineLen  int
	text     int // bytes of the line other than CR
	name     []byte
	value    []byte
	colon    bool
	long     bool
	lastWord []byte // of the request line: its protocol

	http10, hasLength, hasTE, chunked bool
	length                            int64
}

// feed follows p; it returns true when a header section of ambiguous
// framing has ended in it, after which the connection is no longer
// followed (it is to be closed).
func (f *framing) feed(p []byte) bool {
	for len(p) > 0 && f.state != stLost {
		switch f.state {
		case stBody, stChunkData:
			k := min(int64(len(p)), f.remain)
			p, f.remain = p[k:], f.remain-k
			if f.remain == 0 {
				if f.state == stBody {
					f.state = stRequestLine
				} else {
					f.state = stChunkEnd
				}
			}
			continue
		}
		if p[0] != '\n' && f.restOfLineIdle() {
			seg := p
			if i := bytes.IndexByte(p, '\n'); i >= 0 {
				seg = p[:i]
			}
			f.skip(seg)
			p = p[len(seg):]
			continue
		}
		b := p[0]
		p = p[1:]
		if b != '\n' {
			f.addByte(b)
			continue
		}
		if f.endLine() {
			f.state = stLost
			return true
		}
	}
	return false
}

// restOfLineIdle tells whether nothing more of the current line can
// change what is followed, other than where it ends: a trailer line once
// it is not blank, and a header line whose name is longer than any that
// matters or whose kept value is full. Such a line is skipped to its end
// at once rather than byte by byte, so a client sending long header lines
// costs a search for the line feed, not a step per byte.
func (f *framing) restOfLineIdle() bool {
	switch f.state {
	case stTrailer:
		return f.text > 0
	case stHeader:
		return !f.colon && f.long || f.colon && len(f.value) == maxKeep
	}
	return false
}

// skip takes seg, part of an idle line with no line feed in it, as
// addByte would byte by byte: past a full value, any byte other than a
// blank or CR makes the value long.
func (f *framing) skip(seg []byte) {
	f.lineLen += len(seg)
	f.text += len(seg) - bytes.Count(seg, []byte{'\r'})
	if f.state == stHeader && f.colon && !f.long && len(bytes.Trim(seg, " \t\r")) > 0 {
		f.long = true
	}
}

func (f *framing) addByte(b byte) {
	f.lineLen++
	if b != '\r' {
		f.text++
	}
	switch f.state {
	case stRequestLine:
		if b == ' ' {
			f.lastWord = f.lastWord[:0]
		} else if b != '\r' && len(f.lastWord) < maxKeep {
			f.lastWord = append(f.lastWord, b)
		}
	case stChunkSize, stChunkEnd:
		if f.lineLen > maxChunkLine {
			f.state = stLost
		} else if b != '\r' && len(f.value) < maxKeep {
			f.value = append(f.value, b)
		}
	case stHeader, stTrailer:
		switch {
		case b == '\r':
		case !f.colon && b == ':':
			f.colon = true
		case !f.colon:
			if len(f.name) < maxKeep {
				f.name = append(f.name, b)
			} else {
				f.long = true
			}
		case len(f.value) == 0 && (b == ' ' || b == '\t'):
		case len(f.value) < maxKeep:
			f.value = append(f.value, b)
		case b != ' ' && b != '\t':
			f.long = true
		}
	}
}

// endLine handles the line just ended; it returns true when it ended a
// header section of ambiguous framing.
func (f *framing) endLine() (ambiguous bool) {
	empty := f.text == 0
	name, value, long := f.name, bytes.TrimRight(f.value, " \t"), f.long
	lastWord := f.lastWord
	f.lineLen, f.text, f.colon, f.long = 0, 0, false, false
	f.name, f.value, f.lastWord = f.name[:0], f.value[:0], f.lastWord[:0]
	switch f.state {
	case stRequestLine:
		if empty {
			return false // blank lines between requests
		}
		f.http10 = string(lastWord) == "HTTP/1.0"
		f.hasLength, f.hasTE, f.chunked, f.length = false, false, false, 0
		f.state = stHeader
	case stHeader:
		if !empty {
			f.header(name, value, long)
			return false
		}
		if f.hasTE && (f.hasLength || f.http10) {
			return true
		}
		switch {
		case f.hasTE && f.chunked:
			f.state = stChunkSize
		case f.hasTE:
			f.state = stLost // net/http answers 501 and closes
		case f.length > 0:
			f.state, f.remain = stBody, f.length
		default:
			f.state = stRequestLine
		}
	case stChunkSize:
		size, _, _ := bytes.Cut(value, []byte(";"))
		n, err := strconv.ParseUint(string(bytes.TrimRight(size, " \t")), 16, 63)
		switch {
		case err != nil:
			f.state = stLost
		case n == 0:
			f.state = stTrailer
		default:
			f.state, f.remain = stChunkData, int64(n)
		}
	case stChunkEnd:
		if !empty {
			f.state = stLost
		} else {
			f.state = stChunkSize
		}
	case stTrailer:
		if empty {
			f.state = stRequestLine
		}
	}
	return false
}

// header notes what one header line says about the framing.
func (f *framing) header(name, value []byte, long bool) {
	switch {
	case bytes.EqualFold(name, []byte("Content-Length")):
		f.hasLength = true
		n, err := strconv.ParseInt(string(value), 10, 64)
		if err != nil || long || n < 0 {
			f.state = stLost // net/http refuses it
			return
		}
		f.length = n
	case bytes.EqualFold(name, []byte("Transfer-Encoding")):
		f.hasTE = true
		f.chunked = !long && bytes.EqualFold(value, []byte("chunked"))
	}
}
