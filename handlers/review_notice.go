package handlers

import (
	"net/http"
	"net/url"
	"strings"
)

// noticeCookie carries the confirmation of a decision ("Decided …") across
// the redirect that follows it when the browser runs no JavaScript, or when
// htmx is told to load a whole page. The next page of the reviewer site
// shows it once and clears it. Only this server sets it, and the page
// renders it as text.
const noticeCookie = "review_notice"

// pageNoticeCookie does the same for the dashboard's pages: the
// confirmation of a form's success rides across the 303 that follows it
// (post/redirect/get), so reloading the page it leads to repeats nothing.
const pageNoticeCookie = "notice"

// maxNoticeBytes bounds a notice read back from the cookie.
const maxNoticeBytes = 1024

// setNotice keeps msg for the next reviewer page the browser loads.
func setNotice(w http.ResponseWriter, r *http.Request, msg string) {
	keepNotice(w, noticeCookie, "/review", SiteFromContext(r.Context()).ReviewURL, msg)
}

// takeNotice returns the notice kept for this page, if any, and clears it.
func takeNotice(w http.ResponseWriter, r *http.Request) string {
	return readNotice(w, r, noticeCookie, "/review", SiteFromContext(r.Context()).ReviewURL)
}

// setPageNotice keeps msg for the dashboard page at path, which the
// browser is sent to next.
func setPageNotice(w http.ResponseWriter, r *http.Request, path, msg string) {
	keepNotice(w, pageNoticeCookie, path, SiteFromContext(r.Context()).AppURL, msg)
}

// takePageNotice returns the notice kept for the dashboard page at path,
// if any, and clears it.
func takePageNotice(w http.ResponseWriter, r *http.Request, path string) string {
	return readNotice(w, r, pageNoticeCookie, path, SiteFromContext(r.Context()).AppURL)
}

// keepNotice sets the notice cookie name for path on the site at origin.
func keepNotice(w http.ResponseWriter, name, path, origin, msg string) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: url.QueryEscape(msg), Path: path, MaxAge: 60,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: strings.HasPrefix(origin, "https://"),
	})
}

// readNotice returns the notice of the cookie name for path, clearing it.
func readNotice(w http.ResponseWriter, r *http.Request, name, path, origin string) string {
	c, err := r.Cookie(name)
	if err != nil {
		return ""
	}
	http.SetCookie(w, &http.Cookie{
		Name: name, Path: path, MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: strings.HasPrefix(origin, "https://"),
	})
	msg, err := url.QueryUnescape(c.Value)
	if err != nil || len(msg) > maxNoticeBytes {
		return ""
	}
	return msg
}
