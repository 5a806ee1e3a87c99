package storelink

import (
	"bytes"
	"io"
)

// ChunkSize is the most bytes one piece of a file holds (Chunks).
const ChunkSize = 256 << 10

// Chunks are a file's bytes in pieces of at most ChunkSize each, in order.
// A large file is never one piece: a piece is what is allocated, copied,
// written to the database and read back at once. The runtime cannot stop a
// goroutine in the middle of one copy, so a copy of megabytes holds up every
// other request at the next garbage collection; and SQLite writes a row's
// pages while every other writer waits, so a row of megabytes holds up every
// other write. In pieces, each such step is short and others go between.
type Chunks [][]byte

// ChunksOf cuts b into pieces of at most ChunkSize; the pieces share b's
// memory.
func ChunksOf(b []byte) Chunks {
	var c Chunks
	for len(b) > ChunkSize {
		c = append(c, b[:ChunkSize:ChunkSize])
		b = b[ChunkSize:]
	}
	if len(b) > 0 {
		c = append(c, b)
	}
	return c
}

// Place puts piece n of a file in c, growing c as needed, and returns c:
// pieces read in any order end in their places.
func Place(c Chunks, n int, piece []byte) Chunks {
	if n >= len(c) {
		c = append(c, make(Chunks, n+1-len(c))...)
	}
	c[n] = piece
	return c
}

// Len is the file's size in bytes.
func (c Chunks) Len() int64 {
	var n int64
	for _, p := range c {
		n += int64(len(p))
	}
	return n
}

// Reader reads the file from its start.
func (c Chunks) Reader() io.Reader {
	rs := make([]io.Reader, len(c))
	for i, p := range c {
		rs[i] = bytes.NewReader(p)
	}
	return io.MultiReader(rs...)
}

// Drain reads the file from its start, as Reader does, and lets go of each
// piece (sets it nil in c) once it is read: for the last read of a large
// file, whose reader then holds less and less of it rather than all of it
// to the end. c must not be read again.
func (c Chunks) Drain() io.Reader { return &drainReader{c: c} }

type drainReader struct {
	c   Chunks
	off int // read of c[0]
}

func (d *drainReader) Read(p []byte) (int, error) {
	for len(d.c) > 0 && d.off == len(d.c[0]) {
		d.c[0] = nil
		d.c, d.off = d.c[1:], 0
	}
	if len(d.c) == 0 {
		return 0, io.EOF
	}
	n := copy(p, d.c[0][d.off:])
	d.off += n
	return n, nil
}

// WriteTo writes the file to w a piece at a time.
func (c Chunks) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for _, p := range c {
		m, err := w.Write(p)
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Bytes is the file in one slice: a copy, except for a file of one piece.
// For small files and tests; a large file is better read with Reader.
func (c Chunks) Bytes() []byte {
	switch len(c) {
	case 0:
		return nil
	case 1:
		return c[0]
	}
	return bytes.Join(c, nil)
}
