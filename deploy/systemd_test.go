package deploy_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// units are the systemd units deploy/systemd holds.
var units = []string{"arbiter.service", "arbiter-worker.service"}

// systemdAnalyze returns systemd-analyze, skipping the test when it is
// missing and ARBITER_REQUIRE_DEPLOY_TOOLS is not 1.
func systemdAnalyze(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("ARBITER_REQUIRE_DEPLOY_TOOLS") == "1" {
			t.Fatal("systemd-analyze is missing: .ci/run installs Debian's systemd")
		}
		t.Skip("systemd-analyze is missing")
	}
	return p
}

// unitsWithBinary copies the units into a directory with an executable
// standing in for /usr/local/bin/arbiter, which systemd-analyze verify
// requires to exist, and returns the copies' paths.
func unitsWithBinary(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	binary := filepath.Join(dir, "arbiter")
	if err := os.WriteFile(binary, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, u := range units {
		b, err := os.ReadFile(filepath.Join("systemd", u))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte("ExecStart=/usr/local/bin/arbiter ")) {
			t.Fatalf("%s does not start /usr/local/bin/arbiter", u)
		}
		p := filepath.Join(dir, u)
		if err := os.WriteFile(p, bytes.ReplaceAll(b, []byte("/usr/local/bin/arbiter"), []byte(binary)), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// TestSystemd_Verify runs `systemd-analyze verify` on the units: it must
// exit 0 and say nothing, since it reports an unknown or misspelt
// setting only as a warning.
func TestSystemd_Verify(t *testing.T) {
	t.Parallel()
	tool := systemdAnalyze(t)
	var out bytes.Buffer
	c := exec.Command(tool, append([]string{"verify"}, unitsWithBinary(t)...)...)
	c.Stdout, c.Stderr = &out, &out
	if err := c.Run(); err != nil || out.Len() > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out.String())
	}
}

// TestSystemd_Hardening checks the hardening the issue names in each unit
// and asks systemd-analyze security for its exposure score, which must be
// "OK" (below 2.0 of 10) for both.
func TestSystemd_Hardening(t *testing.T) {
	t.Parallel()
	for _, u := range units {
		b, err := os.ReadFile(filepath.Join("systemd", u))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range []string{"DynamicUser=yes", "ProtectSystem=strict", "StateDirectory=arbiter", "NoNewPrivileges=yes",
			"ProtectHome=yes", "PrivateTmp=yes", "CapabilityBoundingSet=", "SystemCallFilter=@system-service"} {
			if !bytes.Contains(b, []byte("\n"+line+"\n")) {
				t.Errorf("%s lacks %s", u, line)
			}
		}
	}
	tool := systemdAnalyze(t)
	score := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+) (\S+)`)
	for _, p := range unitsWithBinary(t) {
		out, err := exec.Command(tool, "security", "--offline=yes", p).CombinedOutput()
		m := score.FindSubmatch(out)
		if err != nil || m == nil {
			t.Fatalf("systemd-analyze security %s: %v\n%s", filepath.Base(p), err, out)
		}
		level, _ := strconv.ParseFloat(string(m[1]), 64)
		t.Logf("%s: exposure %s %s", filepath.Base(p), m[1], m[2])
		if level >= 2 || !strings.HasPrefix(string(m[2]), "OK") {
			t.Errorf("%s: exposure %s %s, want OK (below 2.0)", filepath.Base(p), m[1], m[2])
		}
	}
}
