// Package layouts holds the page frame every HTML page of Arbiter shares.
package layouts

// Page is what the layout needs to know about the page it frames.
type Page struct {
	// Title names the page in the browser's tab, before " · Arbiter".
	Title string
	// Email is the signed-in person's address; "" when nobody is signed in,
	// which hides the navigation and the sign-out button.
	Email string
	// Active is the navigation entry to highlight: "home", "keys", "audit"
	// or "review".
	Active string
	// ReviewURL is the reviewer site's address, for the navigation.
	ReviewURL string
	// ReviewCountURL, when set, is polled for the number of tasks waiting
	// for a human, shown beside the navigation's review entry.
	ReviewCountURL string
}

// navItem is one entry of the navigation.
type navItem struct {
	Key, Label, Href string
}

// nav returns the navigation entries of a signed-in page.
func (p Page) nav() []navItem {
	review := p.ReviewURL
	if review == "" {
		review = "/review"
	}
	return []navItem{
		{"home", "Overview", "/"},
		{"keys", "API keys", "/keys"},
		{"audit", "Audit log", "/audit"},
		{"review", "Review queue", review},
	}
}
