package dashboard

import "strconv"

// formatInt writes n with thousands separators: 12,345.
func formatInt(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + formatInt(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
