package httpapi

import (
	"bufio"
	"bytes"
	"fmt"
	"net/textproto"
	"strconv"
	"strings"
	"testing"
)

// feedAll follows stream in pieces of size n (the whole at once when n is
// 0) and tells whether it was found ambiguous.
func feedAll(stream string, n int) bool {
	f := framing{state: stRequestLine}
	if n == 0 {
		n = len(stream) + 1
	}
	for i := 0; i < len(stream); i += n {
		if f.feed([]byte(stream[i:min(i+n, len(stream))])) {
			return true
		}
	}
	return false
}

// feedBytewise follows stream one byte at a time through addByte and
// endLine, never skipping a line's idle rest: the reference that feed's
// skipping must agree with.
func feedBytewise(stream string) bool {
	f := framing{state: stRequestLine}
	for i := 0; i < len(stream) && f.state != stLost; i++ {
		switch b := stream[i]; {
		case f.state == stBody || f.state == stChunkData:
			if f.remain--; f.remain == 0 {
				if f.state == stBody {
					f.state = stRequestLine
				} else {
					f.state = stChunkEnd
				}
			}
		case b != '\n':
			f.addByte(b)
		case f.endLine():
			return true
		}
	}
	return false
}

func TestFraming(t *testing.T) {
	fake := "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
	get := "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
	both := "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
	for _, c := range []struct {
		name, stream string
		ambiguous    bool
	}{
		{"plain get", get, false},
		{"content length", "PUT / HTTP/1.1\r\ncontent-length: 3\r\n\r\nabc" + get, false},
		{"header lines in a body", "PUT / HTTP/1.1\r\nContent-Length: " + strconv.Itoa(len(fake)) + "\r\n\r\n" + fake + get, false},
		{"header lines in chunks", "PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + strconv.FormatInt(int64(len(fake)), 16) + ";x=y\r\n" + fake + "\r\n0\r\nTrailer: 1\r\n\r\n" + get, false},
		{"both", both, true},
		{"both, any case, after other requests", get + "PUT / HTTP/1.1\r\nContent-Length: 1\r\n\r\nx" + strings.ToLower(both), true},
		{"both, after a chunked request", "PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n" + both, true},
		{"transfer encoding on HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", true},
		{"bare line feeds", "PUT / HTTP/1.1\nContent-Length: 2\n\nab" + "POST / HTTP/1.1\nTransfer-Encoding: chunked\nContent-Length: 1\n\n", true},
		{"blank value padding", "PUT / HTTP/1.1\r\nContent-Length:    2" + strings.Repeat(" ", 200) + "\r\n\r\nab" + both, true},
		{"long value", "PUT / HTTP/1.1\r\nContent-Length: " + strings.Repeat("0", 100) + "2\r\n\r\nab" + both, false},
		{"long lines before both", "POST / HTTP/1.1\r\nX-Pad: " + strings.Repeat("a", 5000) + "\r\n" + strings.Repeat("b", 5000) + ": c\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", true},
		{"long trailer", "PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: " + strings.Repeat("t", 5000) + "\r\n\r\n" + both, true},
	} {
		if got := feedBytewise(c.stream); got != c.ambiguous {
			t.Errorf("%s, byte by byte: ambiguous = %v, want %v", c.name, got, c.ambiguous)
		}
		for _, n := range []int{0, 1, 2, 7} {
			if got := feedAll(c.stream, n); got != c.ambiguous {
				t.Errorf("%s, in pieces of %d: ambiguous = %v, want %v", c.name, n, got, c.ambiguous)
			}
		}
	}
}

// FuzzFraming: any stream is followed without a panic, in whatever pieces
// it arrives, to the outcome it has byte by byte.
func FuzzFraming(f *testing.F) {
	f.Add("PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\n\r\n", 3)
	f.Add("POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 1)
	f.Fuzz(func(t *testing.T, stream string, n int) {
		if n < 1 || n > len(stream)+1 {
			n = len(stream) + 1
		}
		want := feedBytewise(stream)
		if feedAll(stream, 0) != want || feedAll(stream, n) != want {
			t.Fatalf("the pieces change the outcome")
		}
	})
}

// BenchmarkFramingLongHeaders follows a request of 64 header lines of
// 1,000 bytes (what MaxHeaderBytes lets one request send) and, as the
// baseline, has net/textproto parse the same header section, which
// net/http does to every request anyway.
func BenchmarkFramingLongHeaders(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("GET / HTTP/1.1\r\nHost: x\r\n")
	for i := range 64 {
		fmt.Fprintf(&sb, "X-Pad-%04d: %s\r\n", i, strings.Repeat("a", 1000-len("X-Pad-0000: \r\n")))
	}
	sb.WriteString("\r\n")
	stream := []byte(sb.String())
	b.Run("framing", func(b *testing.B) {
		b.SetBytes(int64(len(stream)))
		for b.Loop() {
			f := framing{state: stRequestLine}
			for i := 0; i < len(stream); i += 4096 {
				f.feed(stream[i:min(i+4096, len(stream))])
			}
		}
	})
	b.Run("baseline-textproto", func(b *testing.B) {
		b.SetBytes(int64(len(stream)))
		for b.Loop() {
			r := textproto.NewReader(bufio.NewReader(bytes.NewReader(stream)))
			if _, err := r.ReadLine(); err != nil {
				b.Fatal(err)
			}
			if _, err := r.ReadMIMEHeader(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
