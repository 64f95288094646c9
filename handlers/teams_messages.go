package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/teams"
)

// maxTeamsActivity bounds an activity's body: Teams' activities, a card's
// invoke with its inputs included, are well under this.
const maxTeamsActivity = 256 << 10

var (
	errTeamsUnsigned    = arbiter.Errorf(arbiter.EUNAUTHORIZED, "The request does not carry a valid Bot Framework token for a bot connected here.")
	errTeamsKeys        = arbiter.Errorf(arbiter.EUNAVAILABLE, "The Bot Framework's signing keys cannot be read right now; try again.")
	errTeamsTenant      = arbiter.Errorf(arbiter.EUNAUTHORIZED, "This bot serves another Microsoft Entra tenant.")
	errTeamsNotActivity = arbiter.Errorf(arbiter.EINVALID, "The body is not a Bot Framework activity.")
	errTeamsFailures    = "Too many requests from your address failed their Bot Framework token check; try again later."
)

// TeamsBots finds the connection of the bot a verified token names
// (arbiter.TeamsService implements it).
type TeamsBots interface {
	FindTeamsConnectionByApp(ctx context.Context, appID string) (*arbiter.TeamsConnection, error)
}

// TeamsMessages handles POST /integrations/teams/messages, the messaging
// endpoint of every account's bot: Teams posts the activities of the
// conversations the bot is in. Before anything else, the bearer token is
// verified (teams.Verifier: the Bot Framework's signature, issuer and
// expiry, and the activity's service URL), its audience must be a bot
// connected here and the activity must come from that bot's tenant:
// otherwise 401 and nothing changes. Failed checks are bounded per client
// address (failures, 429 past it, before any work). A conversation the
// bot joined or left is kept or forgotten; a card's Action.Execute is
// answered with the card its clicker sees next, within
// teams.InvokeBudget.
func TeamsMessages(bot *teams.Bot, verifier *teams.Verifier, bots TeamsBots, failures arbiter.RateLimit) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		client := ClientOf(r).LimitKey()
		if ok, wait, err := failures.Available(r.Context(), client); err != nil {
			Error(w, r, err)
			return
		} else if !ok {
			Error(w, r, &arbiter.Error{Code: arbiter.ERATELIMIT, Message: errTeamsFailures, RetryAfter: wait})
			return
		}
		refuse := func(err error) {
			if _, _, ferr := failures.Allow(r.Context(), client); ferr != nil {
				LoggerFromContext(r.Context()).WarnContext(r.Context(), "count a failed Teams token", "error", ferr.Error())
			}
			Error(w, r, err)
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxTeamsActivity))
		if err != nil {
			Error(w, r, arbiter.Errorf(arbiter.ETOOLARGE, "The request body is too large."))
			return
		}
		var a teams.Activity
		if err := json.Unmarshal(body, &a); err != nil || a.Type == "" || a.ServiceURL == "" {
			refuse(errTeamsNotActivity)
			return
		}
		claims, err := verifier.Verify(r.Context(), r.Header.Get("Authorization"), a.ServiceURL)
		if errors.Is(err, teams.ErrKeysOutOfReach) {
			LoggerFromContext(r.Context()).Warn("Teams: the Bot Framework's keys cannot be read", "error", err.Error())
			Error(w, r, errTeamsKeys)
			return
		} else if err != nil {
			LoggerFromContext(r.Context()).Info("Teams: a token refused", "error", err.Error())
			refuse(errTeamsUnsigned)
			return
		}
		var conn *arbiter.TeamsConnection
		for _, app := range claims.Audience {
			if conn, err = bots.FindTeamsConnectionByApp(r.Context(), app); err == nil {
				break
			} else if arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
				Error(w, r, err)
				return
			}
		}
		if conn == nil {
			refuse(errTeamsUnsigned)
			return
		}
		if a.Tenant() != conn.TenantID {
			refuse(errTeamsTenant)
			return
		}
		switch a.Type {
		case teams.TypeConversationUpdate, teams.TypeInstallation:
			if err := bot.ConversationUpdate(r.Context(), conn, &a); err != nil {
				Error(w, r, err)
				return
			}
			w.WriteHeader(http.StatusOK)
		case teams.TypeInvoke:
			ctx, cancel := context.WithTimeout(r.Context(), teams.InvokeBudget)
			defer cancel()
			JSON(w, http.StatusOK, bot.Invoke(ctx, conn, &a))
		default:
			// Messages typed to the bot, reactions: nothing to do.
			w.WriteHeader(http.StatusOK)
		}
	})
}
