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
	// "keys", "members", "settings", "webhooks", "audit", "calibration" (no entry: linked from the overview), "review" or
	// "stats".
	Active string
	// ReviewURL is the reviewer site's address, for the navigation.
	ReviewURL string
	// AppURL is the dashboard's origin when the dashboard and the reviewer
	// site have origins of their own, so that links to the dashboard work
	// from the reviewer site's host; "" when they share one.
	AppURL string
	// SignInURL is the dashboard's sign-in page, coming back to this
	// surface; "" means the dashboard's plain sign-in page.
	SignInURL string
	// SignOutURL is where this page's "Sign out" posts: the sign-out of
	// the page's own origin, "/signout" on the dashboard and
	// "/review/signout" on the reviewer site. A form posted to another
	// origin would carry "Origin: null" under the pages' referrer policy,
	// and be refused as cross-site.
	SignOutURL string
	// ReviewCountURL, when set, is polled for the number of tasks waiting
	// for a human, shown beside the navigation's review entry.
	ReviewCountURL string
	// SecretAddress keeps the page's address out of the Referer of every
	// request the page makes, its own scripts and styles included, for a
	// page whose address holds a secret such as a sign-in token: they name
	// the page's origin only. Other pages send their address to their own
	// origin.
	SecretAddress bool
	// Nav says which navigation entries the signed-in person's role
	// shows, by key; nil shows them all.
	Nav map[string]bool
	// Accounts are the signed-in person's accounts, for the switcher,
	// shown when there are two or more.
	Accounts []AccountChoice
	// SwitchURL is where the switcher posts, on the page's own origin.
	SwitchURL string
}

// AccountChoice is one account of the switcher.
type AccountChoice struct {
	ID, Name, Role string
	Current        bool
}

// CurrentAccount returns the name of the account the person works in, or "".
func (p Page) CurrentAccount() string {
	for _, a := range p.Accounts {
		if a.Current {
			return a.Name
		}
	}
	return ""
}

// Referrer is the page's referrer policy, for the layout's meta tag, which
// overrides the Referrer-Policy header. A page with a secret address gets
// strict-origin rather than no-referrer: under no-referrer a browser also
// sends "Origin: null" with the page's forms, and without Sec-Fetch-Site
// (plain http to a host other than localhost) the cross-origin check could
// then not tell the page's own form from another site's.
func (p Page) Referrer() string {
	if p.SecretAddress {
		return SecretAddressReferrer
	}
	return "same-origin"
}

// SecretAddressReferrer is the referrer policy of a page whose address holds
// a secret; its answer sends it as the Referrer-Policy header too.
const SecretAddressReferrer = "strict-origin"

// AppLink returns the address of the dashboard page at path, for a link
// from this page.
func (p Page) AppLink(path string) string { return p.AppURL + path }

// SignIn returns the sign-in page for a link from this page.
func (p Page) SignIn() string {
	if p.SignInURL == "" {
		return p.AppLink("/signin")
	}
	return p.SignInURL
}

// SignOut returns where the page's "Sign out" posts.
func (p Page) SignOut() string {
	if p.SignOutURL == "" {
		return "/signout"
	}
	return p.SignOutURL
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
	items := []navItem{
		{"home", "Overview", "/"},
		{"tasks", "Tasks", "/tasks"},
		{"keys", "API keys", "/keys"},
		{"members", "Members", "/members"},
		{"settings", "Settings", "/settings"},
		{"webhooks", "Webhooks", "/webhooks"},
		{"audit", "Audit log", "/audit"},
		{"review", "Review queue", review},
		{"stats", "Desk stats", review + "/stats"},
	}
	if p.Nav != nil {
		shown := items[:0]
		for _, it := range items {
			if p.Nav[it.Key] {
				shown = append(shown, it)
			}
		}
		items = shown
	}
	// Every entry but the reviewer site's is a dashboard page.
	for i := range items {
		if items[i].Key != "review" && items[i].Key != "stats" {
			items[i].Href = p.AppLink(items[i].Href)
		}
	}
	return items
}
