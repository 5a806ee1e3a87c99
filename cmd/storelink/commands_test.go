package main

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
)

// TestVersionAndHelp: `storelink version` names the build and exits 0; -h
// on every command prints its flags and exits 0, as asking for help is not
// a mistake; a flag that does not exist is one: exit 2, but 1 for probe,
// a container's health check, for which 2 is reserved (TestProbe).
func TestVersionAndHelp(t *testing.T) {
	call := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), args, func(string) string { return "" }, nil, &out, &errb)
		return code, out.String() + errb.String()
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out := call(args...)
		if code != 0 || !strings.HasPrefix(out, "storelink ") || !strings.Contains(out, runtime.Version()) {
			t.Errorf("storelink %s = %d %q, want 0 and a line naming the build and %s", args[0], code, out, runtime.Version())
		}
	}
	for _, cmd := range [][]string{{"serve"}, {"migrate"}, {"backup"}, {"probe"}, {"listen"}, {"upload"},
		{"secret-key", "rotate"}, {"secret-key", "check"}} {
		for _, help := range []string{"-h", "--help"} {
			code, out := call(append(cmd, help)...)
			if code != 0 || !strings.Contains(out, "Usage") && !strings.Contains(out, "  -") {
				t.Errorf("storelink %s %s = %d, want 0 and its flags:\n%s", strings.Join(cmd, " "), help, code, out)
			}
		}
		want := 2
		if cmd[0] == "probe" {
			want = 1
		}
		if code, out := call(append(cmd, "--no-such-flag")...); code != want {
			t.Errorf("storelink %s --no-such-flag = %d, want %d:\n%s", strings.Join(cmd, " "), code, want, out)
		}
	}
}
