// Package useragent names the browser and operating system of a User-Agent
// header for people, for the audit log.
package useragent

import "strings"

// browsers are the products a user agent names, most specific
// first: Edge and Opera also say Chrome, Chrome also says Safari. Tools
// are shown with their full version, browsers with the major one.
var browsers = []struct {
	token, name string
	tool        bool
}{
	{"EdgA/", "Edge", false}, {"EdgiOS/", "Edge", false}, {"Edg/", "Edge", false}, {"Edge/", "Edge", false},
	{"OPR/", "Opera", false}, {"SamsungBrowser/", "Samsung Internet", false}, {"YaBrowser/", "Yandex Browser", false},
	{"Vivaldi/", "Vivaldi", false}, {"FxiOS/", "Firefox", false}, {"Firefox/", "Firefox", false},
	{"CriOS/", "Chrome", false}, {"HeadlessChrome/", "Headless Chrome", false}, {"Chromium/", "Chromium", false},
	{"Chrome/", "Chrome", false},
	{"curl/", "curl", true}, {"Wget/", "Wget", true}, {"Go-http-client/", "Go HTTP client", true},
	{"python-requests/", "Python requests", true}, {"PostmanRuntime/", "Postman", true},
}

// systems are the operating systems a user agent names, most
// specific first: Android also says Linux, iOS also says Mac OS X.
var systems = []struct{ token, name string }{
	{"Windows", "Windows"}, {"iPhone", "iOS"}, {"iPad", "iPadOS"}, {"iPod", "iOS"},
	{"Android", "Android"}, {"CrOS", "ChromeOS"}, {"Macintosh", "macOS"}, {"Mac OS X", "macOS"},
	{"Ubuntu", "Linux"}, {"Fedora", "Linux"}, {"Linux", "Linux"}, {"FreeBSD", "FreeBSD"}, {"OpenBSD", "OpenBSD"},
}

// Describe names the browser and operating system of a User-Agent
// header for people, as "Chrome 156 on Linux", "Safari 17 on iOS" or
// "curl 8.5.0". It returns "" when it recognises neither; callers then show
// the header itself. Browsers get their major version, tools their full one.
func Describe(ua string) string {
	browser := ""
	for _, b := range browsers {
		if i := strings.Index(ua, b.token); i >= 0 {
			version := productVersion(ua[i+len(b.token):])
			if !b.tool {
				version, _, _ = strings.Cut(version, ".")
			}
			browser = strings.TrimSpace(b.name + " " + version)
			break
		}
	}
	if browser == "" && strings.Contains(ua, "Safari/") && strings.Contains(ua, "AppleWebKit/") {
		// Safari puts its own version in Version/; the Safari/ token is
		// WebKit's build.
		browser = "Safari"
		if i := strings.Index(ua, "Version/"); i >= 0 {
			major, _, _ := strings.Cut(productVersion(ua[i+len("Version/"):]), ".")
			browser = strings.TrimSpace("Safari " + major)
		}
	}
	system := ""
	if strings.Contains(ua, "(") {
		for _, s := range systems {
			if strings.Contains(ua, s.token) {
				system = s.name
				break
			}
		}
		if system == "Android" {
			if i := strings.Index(ua, "Android "); i >= 0 {
				if major, _, _ := strings.Cut(productVersion(ua[i+len("Android "):]), "."); major != "" {
					system = "Android " + major
				}
			}
		}
	}
	switch {
	case browser != "" && system != "":
		return browser + " on " + system
	case browser != "":
		return browser
	}
	return system
}

// productVersion returns the version at the start of s: digits and dots,
// at most 16 characters.
func productVersion(s string) string {
	end := 0
	for end < len(s) && end < 16 && (s[end] == '.' || s[end] >= '0' && s[end] <= '9') {
		end++
	}
	return strings.Trim(s[:end], ".")
}
