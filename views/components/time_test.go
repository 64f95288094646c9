package components

import (
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
)

func TestRelative(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		offset time.Duration // from now: negative is the past
		want   string
	}{
		{0, "just now"},
		{-30 * time.Second, "just now"},
		{30 * time.Second, "just now"},
		{-time.Minute, "1 minute ago"},
		{-5 * time.Minute, "5 minutes ago"},
		{5 * time.Minute, "in 5 minutes"},
		{-3 * time.Hour, "3 hours ago"},
		{time.Hour, "in 1 hour"},
		{-3 * 24 * time.Hour, "3 days ago"},
		{7 * 24 * time.Hour, "in 7 days"},
		{7*24*time.Hour - time.Second, "in 7 days"},
		{59*time.Minute + 40*time.Second, "in 1 hour"},
		{-(59*time.Minute + 40*time.Second), "59 minutes ago"},
		{-40 * 24 * time.Hour, "17 Oct 2026"},
		{40 * 24 * time.Hour, "5 Jan 2027"},
	} {
		if got := Relative(arbiter.TimestampOf(now.Add(c.offset)), now); got != c.want {
			t.Errorf("Relative(now%+v) = %q, want %q", c.offset, got, c.want)
		}
	}
}
