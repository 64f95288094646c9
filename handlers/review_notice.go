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

// maxNoticeBytes bounds a notice read back from the cookie.
const maxNoticeBytes = 1024

// setNotice keeps msg for the next reviewer page the browser loads.
func setNotice(w http.ResponseWriter, r *http.Request, msg string) {
	http.SetCookie(w, &http.Cookie{
		Name: noticeCookie, Value: url.QueryEscape(msg), Path: "/review", MaxAge: 60,
		HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: strings.HasPrefix(SiteFrom(r.Context()).ReviewURL, "https://"),
	})
}

// takeNotice returns the notice kept for this page, if any, and clears it.
func takeNotice(w http.ResponseWriter, r *http.Request) string {
	c, err := r.Cookie(noticeCookie)
	if err != nil {
		return ""
	}
	http.SetCookie(w, &http.Cookie{
		Name: noticeCookie, Path: "/review", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: strings.HasPrefix(SiteFrom(r.Context()).ReviewURL, "https://"),
	})
	msg, err := url.QueryUnescape(c.Value)
	if err != nil || len(msg) > maxNoticeBytes {
		return ""
	}
	return msg
}
