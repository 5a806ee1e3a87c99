package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const (
	systemdUnit    = "../../deploy/storelink.service"
	systemdEnvFile = "../../deploy/storelink.env"
)

// unitSettings reads a systemd unit's Key=value lines (the last of a key
// wins for a check, as it does for most of these).
func unitSettings(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(systemdUnit)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			out[k] = v
		}
	}
	return out
}

// TestSystemdUnit: the unit runs serve hardened, with the data folder as
// its only writable place, restarts it on failure but not on a
// configuration error, and reads its settings from an environment file
// whose example names exactly the variables serve reads.
func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	u := unitSettings(t)
	for k, want := range map[string]string{
		"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
		"StateDirectory": "storelink", "ReadWritePaths": "/var/lib/storelink", "Environment": "STORELINK_DATA=/var/lib/storelink",
		"Restart": "on-failure", "RestartPreventExitStatus": "2", "EnvironmentFile": "/etc/storelink/storelink.env",
		"CapabilityBoundingSet": "", "User": "storelink",
	} {
		if got, ok := u[k]; !ok || got != want {
			t.Errorf("%s: %s=%q, want %q", systemdUnit, k, got, want)
		}
	}
	if !strings.HasSuffix(u["ExecStart"], "/storelink serve") {
		t.Errorf("%s: ExecStart=%q, want …/storelink serve", systemdUnit, u["ExecStart"])
	}

	// The variables serve reads, as it asks for them.
	var asked []string
	if _, err := parseConfig("serve", nil, func(k string) string { asked = append(asked, k); return "" }, io.Discard); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(systemdEnvFile)
	if err != nil {
		t.Fatal(err)
	}
	listed := regexp.MustCompile(`(?m)^#?(STORELINK_[A-Z_]+)=`).FindAllStringSubmatch(string(b), -1)
	var names []string
	for _, m := range listed {
		names = append(names, m[1])
	}
	slices.Sort(asked)
	slices.Sort(names)
	if !slices.Equal(slices.Compact(asked), slices.Compact(names)) {
		t.Errorf("%s lists %v; serve reads %v", systemdEnvFile, names, asked)
	}
}

// TestSystemdUnitVerify runs `systemd-analyze verify` on the unit, with
// ExecStart pointing at a built storelink (verify checks that it is
// there), and fails on anything it says.
func TestSystemdUnitVerify(t *testing.T) {
	t.Parallel()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (Debian's systemd package): the unit is not verified")
	}
	b, err := os.ReadFile(systemdUnit)
	if err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(t.TempDir(), "storelink.service")
	text := strings.Replace(string(b), "ExecStart=/usr/local/bin/storelink ", "ExecStart="+storelinkBinary(t)+" ", 1)
	if err := os.WriteFile(unit, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", unit).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", systemdUnit, err, out)
	}
}
