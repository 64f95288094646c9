package handlers

import (
	"io"
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/slack"
)

// maxSlackInteraction bounds an interaction's body: Slack's payloads
// hold a message's blocks, well under this.
const maxSlackInteraction = 1 << 20

var (
	errSlackUnsigned = arbiter.Errorf(arbiter.EUNAUTHORIZED, "The request is not signed by a connected Slack app, or its timestamp is not within five minutes.")
	errSlackReplayed = arbiter.Errorf(arbiter.EUNAUTHORIZED, "This request was received before.")
)

// SlackInteractions handles POST /integrations/slack/interactions, where
// Slack posts the clicks and modal submissions of an app connected in
// HTTP mode. The request must be signed by the signing secret of a
// connection of its workspace, within five minutes, and not seen before
// by any process (the store keeps the signatures): otherwise 401 and
// nothing changes. A signed one is acknowledged at once
// (Slack waits 3 seconds at most), and handled after.
func SlackInteractions(in *slack.Interactions) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSlackInteraction))
		if err != nil {
			Error(w, r, arbiter.Errorf(arbiter.ETOOLARGE, "The request body is too large."))
			return
		}
		cb, err := slack.ParseInteraction(body)
		if err != nil || cb.Team.ID == "" {
			Error(w, r, errSlackUnsigned)
			return
		}
		conns, err := in.Store.ListSlackConnections(r.Context(), arbiter.SlackModeHTTP, cb.Team.ID)
		if err != nil {
			Error(w, r, err)
			return
		}
		var conn *arbiter.SlackConnection
		for _, c := range conns {
			if slack.Verify(r.Header, body, c.SigningSecret) == nil {
				conn = c
				break
			}
		}
		if conn == nil {
			Error(w, r, errSlackUnsigned)
			return
		}
		if first, err := in.Store.FirstSlackRequest(r.Context(), r.Header.Get("X-Slack-Signature")); err != nil {
			Error(w, r, err)
			return
		} else if !first {
			Error(w, r, errSlackReplayed)
			return
		}
		w.WriteHeader(http.StatusOK)
		in.Dispatch(r.Context(), conn, cb)
	})
}
