package handlers

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/slack"
)

// maxSlackInteraction bounds an interaction's body: Slack's payloads
// hold a message's blocks, well under this.
const maxSlackInteraction = 1 << 20

// slackSignatureWindow is how far a request's timestamp may be from now:
// Slack's five minutes.
const slackSignatureWindow = 5 * time.Minute

var (
	errSlackUnsigned = arbiter.Errorf(arbiter.EUNAUTHORIZED, "The request is not signed by a connected Slack app, or its timestamp is not within five minutes.")
	errSlackReplayed = arbiter.Errorf(arbiter.EUNAUTHORIZED, "This request was received before.")
	errSlackFailures = "Too many requests for this Slack workspace failed their signature check; try again later."
	errSlackBusy     = &arbiter.Error{Code: arbiter.ERATELIMIT, RetryAfter: time.Second,
		Message: "Arbiter is handling many Slack clicks at once; click again in a moment."}
)

// SlackFailureLimits bound the requests to the interactions URL that fail
// their signature check: each costs a lookup of the workspace's
// connections and a MAC of the body per connection. A request must pass
// both, and only failures spend. ByTeamAndClient is the tight one, per
// workspace from one client address; ByTeam a looser ceiling on a
// workspace from everywhere, so no single client can keep Slack's own
// requests for a workspace out, yet the work stays bounded.
type SlackFailureLimits struct {
	ByTeamAndClient arbiter.RateLimit
	ByTeam          arbiter.RateLimit
}

// available returns an ERATELIMIT error when either limit of the
// workspace, from the client, is spent, without spending; when a limit
// fails, its error.
func (l SlackFailureLimits) available(ctx context.Context, team, client string) error {
	for _, s := range []struct {
		limiter arbiter.RateLimit
		key     string
	}{{l.ByTeamAndClient, team + " " + client}, {l.ByTeam, team}} {
		ok, wait, err := s.limiter.Available(ctx, s.key)
		switch {
		case err != nil:
			return err
		case !ok:
			return &arbiter.Error{Code: arbiter.ERATELIMIT, Message: errSlackFailures, RetryAfter: wait}
		}
	}
	return nil
}

// failed spends one failure of each limit; a limit that fails is logged:
// the request is refused all the same.
func (l SlackFailureLimits) failed(ctx context.Context, team, client string) {
	for _, s := range []struct {
		limiter arbiter.RateLimit
		key     string
	}{{l.ByTeamAndClient, team + " " + client}, {l.ByTeam, team}} {
		if _, _, err := s.limiter.Allow(ctx, s.key); err != nil {
			LoggerFromContext(ctx).WarnContext(ctx, "count a failed Slack signature", "error", err.Error())
		}
	}
}

// SlackInteractions handles POST /integrations/slack/interactions, where
// Slack posts the clicks and modal submissions of an app connected in
// HTTP mode. The request must be signed by the signing secret of a
// connection of its workspace, within five minutes, and not seen before
// by any process (the store keeps the signatures): otherwise 401 and
// nothing changes. A signed one is acknowledged at once (Slack waits 3
// seconds at most), and handled after.
//
// The work is bounded: a timestamp out of its window is refused before
// any lookup; a workspace whose requests failed their check too often
// (limits) is answered 429 before any lookup or MAC; the secrets of at
// most arbiter.MaxSlackAccountsPerWorkspace connections are tried; and
// when slack.Interactions handles MaxInFlight clicks already, a click is
// answered 429 (Slack shows the clicker an error; they click again).
func SlackInteractions(in *slack.Interactions, limits SlackFailureLimits) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		refuse := func(err error) { Error(w, r, err) }
		ts, err := strconv.ParseInt(r.Header.Get("X-Slack-Request-Timestamp"), 10, 64)
		if err != nil || time.Since(time.Unix(ts, 0)).Abs() > slackSignatureWindow {
			refuse(errSlackUnsigned)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSlackInteraction))
		if err != nil {
			refuse(arbiter.Errorf(arbiter.ETOOLARGE, "The request body is too large."))
			return
		}
		cb, err := slack.ParseInteraction(body)
		if err != nil || cb.Team.ID == "" || len(cb.Team.ID) > 32 {
			refuse(errSlackUnsigned)
			return
		}
		team, client := cb.Team.ID, ClientOf(r).LimitKey()
		if err := limits.available(r.Context(), team, client); err != nil {
			refuse(err)
			return
		}
		conns, err := in.Store.ListSlackConnections(r.Context(), arbiter.SlackModeHTTP, team)
		if err != nil {
			refuse(err)
			return
		}
		var conn *arbiter.SlackConnection
		for _, c := range conns[:min(len(conns), arbiter.MaxSlackAccountsPerWorkspace)] {
			if slack.Verify(r.Header, body, c.SigningSecret) == nil {
				conn = c
				break
			}
		}
		if conn == nil {
			limits.failed(r.Context(), team, client)
			refuse(errSlackUnsigned)
			return
		}
		if first, err := in.Store.FirstSlackRequest(r.Context(), r.Header.Get("X-Slack-Signature")); err != nil {
			refuse(err)
			return
		} else if !first {
			refuse(errSlackReplayed)
			return
		}
		if !in.TryDispatch(r.Context(), conn, cb) {
			refuse(errSlackBusy)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
}
