package handlers

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/slack"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// SlackTeams checks a bot token with Slack and names its workspace
// (slack.Client implements it).
type SlackTeams interface {
	TeamOf(ctx context.Context, botToken string) (string, error)
}

// slackNotices are the settings page's confirmations, by ?notice=.
var slackNotices = map[string]string{
	"connected":    "Slack is connected. Tasks that need a person are posted to the channel from now on.",
	"disconnected": "Slack is disconnected. Messages not yet sent were dropped.",
}

// DashboardSlack handles GET /settings/slack: the account's Slack
// connection, never its tokens, and the form to connect or replace it;
// when ready is false (no ARBITER_SECRET_KEY), why Slack cannot be
// connected.
func DashboardSlack(conns arbiter.SlackService, sealed bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := slackView(r, conns, sealed)
		if err != nil {
			Error(w, r, err)
			return
		}
		v.Notice = slackNotices[r.URL.Query().Get("notice")]
		Render(w, r, http.StatusOK, dashboard.Slack(PageOf(r, "Slack", "settings"), v))
	})
}

func slackView(r *http.Request, conns arbiter.SlackService, sealed bool) (dashboard.SlackView, error) {
	v := dashboard.SlackView{Sealed: sealed, InteractionsURL: SiteFromContext(r.Context()).AppURL + "/integrations/slack/interactions"}
	v.Manifest, v.Unreachable = slack.Manifest(v.InteractionsURL), slackCannotReach(v.InteractionsURL)
	if conns == nil {
		return v, nil
	}
	c, err := conns.FindSlackConnection(r.Context(), arbiter.AccountIDFromContext(r.Context()))
	if err != nil && arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
		return v, err
	}
	v.Connection = c
	if c != nil {
		v.Mode, v.Channel = c.Mode, c.DefaultChannel
	}
	return v, nil
}

// DashboardSlackConnect handles POST /settings/slack: it checks the bot
// token with Slack (auth.test) and stores the connection, its tokens
// sealed. A refusal answers the page with why, 400 (409 without a key to
// seal with), keeping nothing typed but the mode and the channel.
func DashboardSlackConnect(conns arbiter.SlackService, teams SlackTeams, sealed bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, accountID := r.Context(), arbiter.AccountIDFromContext(r.Context())
		in := arbiter.SlackConnectionInput{Mode: r.PostFormValue("mode"), BotToken: r.PostFormValue("bot_token"),
			AppToken: r.PostFormValue("app_token"), SigningSecret: r.PostFormValue("signing_secret"),
			DefaultChannel: r.PostFormValue("channel")}
		err := in.Validate()
		if err == nil && (!sealed || conns == nil || teams == nil) {
			err = arbiter.ErrSlackNeedsKey
		}
		var team string
		status := http.StatusBadRequest
		if err == nil {
			// Slack's refusal is its error code; anything else means Slack
			// did not answer.
			if team, err = teams.TeamOf(ctx, in.BotToken); err != nil && (slack.Refused(err) || slackReason(err) != slackNoAnswer) {
				LoggerFromContext(ctx).Info("Slack refused a bot token", "account_id", accountID, "error", err.Error())
				err = arbiter.FieldErrorf("bot_token", "Slack refused the bot token (%s). Copy it again from OAuth & Permissions.", slackReason(err))
			} else if err != nil {
				LoggerFromContext(ctx).Warn("Slack could not be reached", "account_id", accountID, "error", err.Error())
				err = arbiter.Errorf(arbiter.EINVALID, "Could not reach Slack (%s). Nothing was saved; try again in a moment.", slack.Unreachable(err))
				status = http.StatusBadGateway
			}
		}
		if err == nil {
			_, err = conns.ConnectSlack(ctx, accountID, in, team, ActorOf(r))
		}
		if code := arbiter.ErrorCode(err); code == arbiter.EINVALID || code == arbiter.ECONFLICT {
			v, verr := slackView(r, conns, sealed)
			if verr != nil {
				Error(w, r, verr)
				return
			}
			v.Mode, v.Channel, v.Error = in.Mode, in.DefaultChannel, arbiter.ErrorMessage(err)
			// The secrets typed stay in their fields, but one the refusal
			// is about: a refusal of the channel, or a Slack that did not
			// answer, asks for nothing to be pasted again.
			v.BotToken, v.SigningSecret, v.AppToken = in.BotToken, in.SigningSecret, in.AppToken
			switch arbiter.ErrorField(err) {
			case "bot_token":
				v.BotToken = ""
			case "signing_secret":
				v.SigningSecret = ""
			case "app_token":
				v.AppToken = ""
			}
			if code == arbiter.ECONFLICT {
				status = http.StatusConflict
			}
			Render(w, r, status, dashboard.Slack(PageOf(r, "Slack", "settings"), v))
			return
		} else if err != nil {
			Error(w, r, err)
			return
		}
		redirect(w, r, "/settings/slack?notice=connected")
	})
}

// DashboardSlackDisconnect handles POST /settings/slack/disconnect.
func DashboardSlackDisconnect(conns arbiter.SlackService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if conns == nil {
			Error(w, r, arbiter.Errorf(arbiter.ENOTFOUND, "Slack is not connected to this account."))
			return
		}
		if err := conns.DisconnectSlack(ctx, arbiter.AccountIDFromContext(ctx), ActorOf(r)); err != nil {
			Error(w, r, err)
			return
		}
		redirect(w, r, "/settings/slack?notice=disconnected")
	})
}

// slackCannotReach says why Slack cannot post to the interactions address
// u, when it cannot: a loopback or private host, or an address that is not
// https; "" when it can.
func slackCannotReach(u string) string {
	parsed, err := url.Parse(u)
	if err != nil {
		return "Slack cannot post clicks to " + u + ", which is not an address."
	}
	switch {
	case arbiter.PrivateHost(strings.ToLower(parsed.Hostname())):
		return "Slack cannot reach " + u + ": " + parsed.Hostname() + " is a loopback or private address. Choose Socket Mode, or set ARBITER_APP_URL to the public https address where Slack can reach Arbiter."
	case parsed.Scheme != "https":
		return "Slack posts clicks only to https addresses, and " + u + " is not one. Choose Socket Mode, or serve Arbiter over https and set ARBITER_APP_URL to that address."
	}
	return ""
}

// slackNoAnswer is slackReason's word for a call Slack did not answer.
const slackNoAnswer = "no answer"

// slackReason is Slack's error code for a failed call, or a generic word
// for a failure to reach it: never a token, never an address.
func slackReason(err error) string {
	msg := err.Error()
	for _, r := range msg {
		if !(r == '_' || r >= 'a' && r <= 'z') {
			return slackNoAnswer
		}
	}
	return msg
}
