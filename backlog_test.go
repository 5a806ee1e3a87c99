package storelink

import (
	"strconv"
	"strings"
	"testing"
)

func TestBacklogFull(t *testing.T) {
	for _, c := range []struct {
		name      string
		ahead     int
		perSecond float64
		want      int
	}{
		{"ahead over rate, rounded up", 25, 10, 3},
		{"at least one second", 1, 100, 1},
		{"nothing ahead counts as one", 0, 0.5, 2},
		{"no recent rate: a minute", 7, 0, 60},
		{"bounded", 100000, 1, BacklogRetryMax},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := BacklogFull(Backlog{Waiting: 20, Ahead: c.ahead}, 20, c.perSecond)
			if err.Code != EBACKLOG || err.RetryAfter != c.want {
				t.Fatalf("BacklogFull = %s %d, want %s with Retry-After %d", err.Code, err.RetryAfter, EBACKLOG, c.want)
			}
			if !strings.Contains(err.Message, "20 uploads of this client are waiting") || !strings.HasSuffix(err.Message, "Retry after "+strconv.Itoa(c.want)+" seconds.") {
				t.Fatalf("message %q", err.Message)
			}
		})
	}
}
