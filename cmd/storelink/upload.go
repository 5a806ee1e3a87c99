package main

import (
	"context"
	"errors"
	"io"
)

// upload is the partner-side uploader (CONTRACT 3.6). It returns the exit
// code: 0 applied without errors, 1 rejected or row errors; an error means a
// usage (2, via usageError) or transport (2) problem.
func upload(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) (int, error) {
	return 2, errors.New("not built yet")
}
