package arbiter_test

import (
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
)

func TestParseWait(t *testing.T) {
	for _, tc := range []struct {
		values []string
		want   time.Duration
	}{
		{nil, 0}, {[]string{"0"}, 0}, {[]string{"1"}, time.Second}, {[]string{"60"}, time.Minute}, {[]string{"007"}, 7 * time.Second},
	} {
		if got, err := arbiter.ParseWait(tc.values); err != nil || got != tc.want {
			t.Errorf("ParseWait(%q) = %s, %v; want %s", tc.values, got, err, tc.want)
		}
	}
	for _, bad := range [][]string{{"61"}, {"-1"}, {"1.5"}, {""}, {" 1"}, {"+1"}, {"1e1"}, {"abc"}, {"99999999999"}, {"1", "2"}} {
		if _, err := arbiter.ParseWait(bad); arbiter.ErrorCode(err) != arbiter.EINVALID || !strings.Contains(arbiter.ErrorMessage(err), "wait") {
			t.Errorf("ParseWait(%q) = %v, want EINVALID naming wait", bad, err)
		}
	}
}

func TestFinalStatus(t *testing.T) {
	for _, status := range arbiter.TaskStatuses {
		want := status == arbiter.StatusCompleted || status == arbiter.StatusExpired
		if got := arbiter.FinalStatus(status); got != want {
			t.Errorf("FinalStatus(%s) = %v", status, got)
		}
	}
}

func TestParseTaskCreate_Deadline(t *testing.T) {
	const base = `{"prompt":"p","allowed_verdicts":["a"]`
	for _, tc := range []struct {
		field string
		want  int
	}{
		{``, 0}, {`,"deadline_seconds":60`, 60}, {`,"deadline_seconds":2592000`, 2592000},
		// A whole number however it is written (JSON Schema's integer).
		{`,"deadline_seconds":60.0`, 60}, {`,"deadline_seconds":1e2`, 100}, {`,"deadline_seconds":3600.000`, 3600},
	} {
		in, err := arbiter.ParseTaskCreate([]byte(base + tc.field + `}`))
		if err != nil || in.DeadlineSeconds != tc.want {
			t.Errorf("%s: DeadlineSeconds %d, %v; want %d", tc.field, in.DeadlineSeconds, err, tc.want)
		}
	}
	for _, bad := range []string{`59`, `0`, `-60`, `2592001`, `60.5`, `60.000001`, `"60"`, `true`, `99999999999999999999`, `1e400`} {
		_, err := arbiter.ParseTaskCreate([]byte(base + `,"deadline_seconds":` + bad + `}`))
		if arbiter.ErrorCode(err) != arbiter.EINVALID || !strings.Contains(arbiter.ErrorMessage(err), "deadline_seconds must be a whole number of seconds from 60 to 2592000") {
			t.Errorf("deadline_seconds %s: %v, want EINVALID naming the range", bad, err)
		}
	}
	items, err := arbiter.ParseTaskBatch([]byte(`{"tasks":[` + base + `,"deadline_seconds":3600},` + base + `,"deadline_seconds":30}]}`))
	if err != nil || items[0].Err != nil || items[0].Create.DeadlineSeconds != 3600 || arbiter.ErrorCode(items[1].Err) != arbiter.EINVALID {
		t.Errorf("a batch's deadlines: %+v, %v", items, err)
	}
	// The deadline is part of what a create asks for.
	a, _ := arbiter.ParseTaskCreate([]byte(base + `,"deadline_seconds":60}`))
	b, _ := arbiter.ParseTaskCreate([]byte(base + `,"deadline_seconds":61}`))
	if a.Fingerprint() == b.Fingerprint() {
		t.Error("two deadlines share a fingerprint")
	}
}

func TestExpiredError(t *testing.T) {
	at := arbiter.Timestamp(1795415525173)
	for _, err := range []*arbiter.Error{arbiter.ExpiredError(nil), arbiter.ExpiredError(&at)} {
		if err.Code != arbiter.ECONFLICT || !strings.Contains(err.Message, "expired") {
			t.Errorf("ExpiredError = %+v", err)
		}
	}
	if msg := arbiter.ExpiredError(&at).Message; !strings.Contains(msg, "2026-11-23 06:32:05 UTC") {
		t.Errorf("ExpiredError(%d) does not say when: %q", at, msg)
	}
}
