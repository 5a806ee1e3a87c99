package main

import (
	"debug/buildinfo"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const dockerfile = "../../Dockerfile"

// dockerBuild is the image's build step as the Dockerfile writes it: the
// environment set with ENV in the build stage and the arguments of
// `RUN go build`.
type dockerBuild struct {
	env  []string
	args []string
}

// readDockerBuild reads the build stage of the Dockerfile: its ENV lines
// and its one `RUN go build` line, split as the shell splits it (double
// quotes only, which is all it uses).
func readDockerBuild(t *testing.T) dockerBuild {
	t.Helper()
	b, err := os.ReadFile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	stage, _, ok := strings.Cut(string(b), "\nFROM scratch")
	if !ok {
		t.Fatalf("%s has no final stage FROM scratch", dockerfile)
	}
	var d dockerBuild
	for _, line := range strings.Split(stage, "\n") {
		if v, ok := strings.CutPrefix(line, "ENV "); ok {
			d.env = append(d.env, strings.Fields(v)...)
		}
		if v, ok := strings.CutPrefix(line, "RUN go build "); ok {
			if d.args != nil {
				t.Fatalf("%s has two RUN go build lines", dockerfile)
			}
			d.args = shellWords(t, v)
		}
	}
	if d.args == nil {
		t.Fatalf("%s has no RUN go build line in its build stage", dockerfile)
	}
	return d
}

// shellWords splits a command line on spaces outside double quotes.
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	quoted, inWord := false, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				words = append(words, w.String())
				w.Reset()
			}
			inWord = false
		case r == '\\' || r == '\'' || r == '$':
			t.Fatalf("the go build line %q uses %q, which this test does not read", s, r)
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("unbalanced quotes in %q", s)
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// TestDockerfileStaticBinary builds storelink with the environment and
// flags of the Dockerfile's build stage and checks that the binary runs on
// an empty image: statically linked (no program interpreter, no shared
// library), built without cgo. No container engine is needed, so this
// runs wherever the tests run.
func TestDockerfileStaticBinary(t *testing.T) {
	longTest(t)
	t.Parallel()
	d := readDockerBuild(t)
	if !slices.Contains(d.env, "CGO_ENABLED=0") {
		t.Errorf("%s: the build stage does not set CGO_ENABLED=0 (ENV: %v)", dockerfile, d.env)
	}
	i := slices.Index(d.args, "-o")
	if i < 0 || i+3 != len(d.args) || d.args[i+2] != "./cmd/storelink" {
		t.Fatalf("%s: want RUN go build FLAGS -o OUT ./cmd/storelink, got %q", dockerfile, d.args)
	}
	out := filepath.Join(t.TempDir(), "storelink")
	args := append(append([]string{"build"}, d.args[:i]...), "-o", out, "./cmd/storelink")
	cmd := exec.Command("go", args...)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), d.env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}

	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the binary has a %s program header: it is dynamically linked", p.Type)
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v (%v)", libs, err)
	}
	info, err := buildinfo.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
		t.Errorf("build settings CGO_ENABLED=%q -trimpath=%q, want 0 and true", settings["CGO_ENABLED"], settings["-trimpath"])
	}
	if v, err := exec.Command(out, "--help").Output(); err != nil || !strings.Contains(string(v), "storelink probe URL") {
		t.Errorf("the static binary does not run: %v %s", err, v)
	}
}

// TestDockerfileRuntime checks what the final stage promises: an empty
// base, a user that is not root, the data in a volume, and a health check
// through the binary's own probe of /readyz on the port it listens on.
func TestDockerfileRuntime(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	_, final, _ := strings.Cut(string(b), "\nFROM scratch\n")
	user := regexp.MustCompile(`(?m)^USER (\S+)$`).FindStringSubmatch(final)
	if user == nil || user[1] == "0" || strings.HasPrefix(user[1], "0:") || strings.HasPrefix(user[1], "root") {
		t.Fatalf("final stage USER %v: want a user that is not root", user)
	}
	addr := regexp.MustCompile(`STORELINK_ADDR=\S+:(\d+)\b`).FindStringSubmatch(final)
	health := regexp.MustCompile(`CMD \["/storelink", "probe", "http://127\.0\.0\.1:(\d+)/readyz"\]`).FindStringSubmatch(final)
	switch {
	case addr == nil || health == nil:
		t.Errorf("final stage: want ENV STORELINK_ADDR=…:PORT and HEALTHCHECK … CMD [\"/storelink\", \"probe\", \"http://127.0.0.1:PORT/readyz\"]")
	case addr[1] != health[1]:
		t.Errorf("the health check probes port %s, serve listens on %s", health[1], addr[1])
	}
	for _, want := range []string{"VOLUME /data", "STORELINK_DATA=/data", "--chown=" + strings.SplitN(user[1], ":", 2)[0],
		"/etc/ssl/certs/ca-certificates.crt", `ENTRYPOINT ["/storelink"]`} {
		if !strings.Contains(final, want) {
			t.Errorf("final stage lacks %q", want)
		}
	}
}
