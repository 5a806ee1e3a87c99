package storelink_test

import (
	"bytes"
	"io"
	"testing"

	"storelink"
)

// TestChunksDrain reads a file of several pieces through Drain: the bytes
// are the file's, and every piece is let go once read.
func TestChunksDrain(t *testing.T) {
	file := bytes.Repeat([]byte("S1;4006381333931;A-1;5;9.99\n"), 3*storelink.ChunkSize/28)
	c := storelink.ChunksOf(file)
	if len(c) < 3 {
		t.Fatalf("%d pieces, want at least 3", len(c))
	}
	got, err := io.ReadAll(c.Drain())
	if err != nil || !bytes.Equal(got, file) {
		t.Fatalf("read %d bytes (err %v), want the file's %d", len(got), err, len(file))
	}
	for i, p := range c {
		if p != nil {
			t.Errorf("piece %d is still held", i)
		}
	}
}
