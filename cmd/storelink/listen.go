package main

import (
	"context"
	"errors"
	"io"
)

// listen is the partner-side webhook receiver (CONTRACT 6.6).
func listen(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return errors.New("not built yet")
}
