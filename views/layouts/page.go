// Package layouts holds the page frame every HTML page of Arbiter shares.
package layouts

// Page is what the layout needs to know about the page it frames.
type Page struct {
	// Title names the page in the browser's tab, before " · Arbiter".
	Title string
	// Email is the signed-in person's address; "" when nobody is signed in,
	// which hides the navigation and the sign-out button.
	Email string
	// Active is the navigation entry to highlight: "home", "tasks",
	// "keys", "audit" or "review".
	Active string
	// ReviewURL is the reviewer site's address, for the navigation.
	ReviewURL string
	// ReviewCountURL, when set, is polled for the number of tasks waiting
	// for a human, shown beside the navigation's review entry.
	ReviewCountURL string
	// NoReferrer keeps the page's address out of the Referer of every
	// request the page makes, its own scripts and styles included, for a
	// page whose address holds a secret such as a sign-in token. Other
	// pages send their address to their own origin only.
	NoReferrer bool
}

// Referrer is the page's referrer policy, for the layout's meta tag, which
// overrides the Referrer-Policy header.
func (p Page) Referrer() string {
	if p.NoReferrer {
		return "no-referrer"
	}
	return "same-origin"
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
		{"tasks", "Tasks", "/tasks"},
		{"keys", "API keys", "/keys"},
		{"audit", "Audit log", "/audit"},
		{"review", "Review queue", review},
	}
}
