package handlers

import (
	"errors"
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/review"
)

// ChatLinkShow handles GET /review/chat-links/{token}, behind a session:
// the chat user the link offers to link to the signed-in person, and a
// form to do it. It changes nothing; a link that cannot link, or one
// offered to someone who does not sign in as the signed-in person does,
// answers a page saying why.
func ChatLinkShow(links arbiter.ChatLinkService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := chatLinkView(r)
		o, err := links.FindChatLinkOffer(r.Context(), r.PathValue("token"), ActorOf(r).PersonID)
		if err != nil {
			chatLinkRefused(w, r, v, err)
			return
		}
		v.Provider, v.UserID, v.Workspace, v.Email = arbiter.ChatProviderLabel(o.User.Provider), o.User.UserID, o.User.Workspace, o.User.Email
		Render(w, r, http.StatusOK, review.ChatLink(PageOf(r, "Link your "+v.Provider+" account", ""), v))
	})
}

// ChatLinkUse handles POST /review/chat-links/{token}, the page's form:
// it links the chat user to the signed-in person, once, when they sign
// in with the address the chat app confirmed.
func ChatLinkUse(links arbiter.ChatLinkService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := chatLinkView(r)
		o, err := links.LinkChatUser(r.Context(), r.PathValue("token"), ActorOf(r))
		if err != nil {
			chatLinkRefused(w, r, v, err)
			return
		}
		v.Linked, v.Provider, v.UserID, v.Workspace, v.Email = true, arbiter.ChatProviderLabel(o.User.Provider), o.User.UserID, o.User.Workspace, o.User.Email
		Render(w, r, http.StatusOK, review.ChatLink(PageOf(r, "Linked", ""), v))
	})
}

func chatLinkView(r *http.Request) review.ChatLinkView {
	return review.ChatLinkView{Action: "/review/chat-links/" + r.PathValue("token"), QueueURL: "/review/queue"}
}

// chatLinkRefused answers the page of a link that cannot link: 404 for
// one unknown, used or expired, 403 for one offered to someone else.
func chatLinkRefused(w http.ResponseWriter, r *http.Request, v review.ChatLinkView, err error) {
	status := http.StatusForbidden
	switch {
	case errors.Is(err, arbiter.ErrChatLinkInvalid):
		status = http.StatusNotFound
	case arbiter.ErrorCode(err) != arbiter.EUNAUTHORIZED:
		Error(w, r, err)
		return
	}
	v.Error = arbiter.ErrorMessage(err)
	Render(w, r, status, review.ChatLink(PageOf(r, "Link", ""), v))
}
