// Package components holds the small pieces the dashboard's pages share:
// headings, alerts, empty states, times.
package components

import (
	"fmt"
	"time"

	"github.com/arbiterhq/arbiter"
)

// Relative says how far ts is from now: "just now", "5 minutes ago",
// "3 days ago" for the past, "in 5 minutes", "in 7 days" for the future
// (an invitation's expiry), or the date for anything more than a month
// away either way.
func Relative(ts arbiter.Timestamp, now time.Time) string {
	d := now.Sub(ts.Time())
	future := d < 0
	if future && d > -time.Minute {
		return "just now"
	}
	if future {
		// A future time counts down as the page is read: 6 days 23 hours
		// from now is "in 7 days", not "in 6 days".
		d = -d
		switch {
		case d < time.Hour:
			d = d.Round(time.Minute)
		case d < 24*time.Hour:
			d = d.Round(time.Hour)
		default:
			d = d.Round(24 * time.Hour)
		}
	}
	var span string
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		span = plural(int(d/time.Minute), "minute")
	case d < 24*time.Hour:
		span = plural(int(d/time.Hour), "hour")
	case d < 30*24*time.Hour:
		span = plural(int(d/(24*time.Hour)), "day")
	default:
		return ts.Time().Format("2 Jan 2006")
	}
	if future {
		return "in " + span
	}
	return span + " ago"
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
