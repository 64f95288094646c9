// Package components holds the small pieces the dashboard's pages share:
// headings, alerts, empty states, times.
package components

import (
	"fmt"
	"time"

	"github.com/arbiterhq/arbiter"
)

// Relative says how long ago ts was, seen from now: "just now",
// "5 minutes ago", "3 days ago", or the date for anything older than a month.
func Relative(ts arbiter.Timestamp, now time.Time) string {
	d := now.Sub(ts.Time())
	switch {
	case d < 0:
		return "just now"
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return plural(int(d/time.Minute), "minute") + " ago"
	case d < 24*time.Hour:
		return plural(int(d/time.Hour), "hour") + " ago"
	case d < 30*24*time.Hour:
		return plural(int(d/(24*time.Hour)), "day") + " ago"
	}
	return ts.Time().Format("2 Jan 2006")
}

// Exact is ts in UTC to the second, for a title or an audit line.
func Exact(ts arbiter.Timestamp) string {
	return ts.Time().Format("2006-01-02 15:04:05 UTC")
}

// Datetime is ts for a <time datetime> attribute.
func Datetime(ts arbiter.Timestamp) string {
	return ts.Time().Format(time.RFC3339)
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}
