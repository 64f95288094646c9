package web

import (
	"errors"
	"net/http"
	"unicode/utf8"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/handlers"
)

var (
	errFormUnreadable = arbiter.Errorf(arbiter.EINVALID, "The form could not be read. Go back to the page and try again.")
	errFormNotText    = arbiter.Errorf(arbiter.EINVALID, "The form holds characters that are not text (not valid UTF-8). Go back, retype what you entered, and try again.")
	errFormTooLarge   = arbiter.Errorf(arbiter.ETOOLARGE, "The form is larger than %d bytes.", arbiter.MaxBodyBytes)
)

// readForms is middleware for the pages: it parses each request's form
// (the query, and a posted body) once, before any handler, and answers 400
// when it cannot be read or when a name or value is not valid UTF-8, which
// anyone can send and no store should keep. Handlers then read r.Form and
// r.PostForm as parsed here.
func readForms(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				handlers.Error(w, r, errFormTooLarge)
				return
			}
			handlers.Error(w, r, errFormUnreadable)
			return
		}
		for name, values := range r.Form {
			if !utf8.ValidString(name) {
				handlers.Error(w, r, errFormNotText)
				return
			}
			for _, v := range values {
				if !utf8.ValidString(v) {
					handlers.Error(w, r, errFormNotText)
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}
