package sqlite

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"

	"storelink"
)

func TestFault(t *testing.T) {
	full := fmt.Errorf("probe write: %w", &os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC})
	if code := storelink.ErrorCode(Fault(full)); code != storelink.ENOSPACE {
		t.Fatalf("Fault(ENOSPC) has code %s", code)
	}
	other := errors.New("boom")
	if Fault(other) != other {
		t.Fatal("Fault changed an error that is not a full disk")
	}
}
