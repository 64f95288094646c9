package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/teams"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// TeamsCredentials checks a bot's credentials with Microsoft's token
// service (teams.Tokens implements it).
type TeamsCredentials interface {
	Check(tenant, appID, secret string) error
}

// teamsNotices are the settings page's confirmations, by ?notice=.
var teamsNotices = map[string]string{
	"connected":    "Microsoft Teams is connected. Add the bot to a channel or a chat with the app package below, then choose where questions go.",
	"disconnected": "Microsoft Teams is disconnected. Its conversations and the cards not yet sent were forgotten.",
	"default":      "Questions go to the conversation you chose.",
}

// DashboardTeams handles GET /settings/teams: the account's bot, never its
// secret, the conversations it was added to and the one questions go
// to, the app package to upload, and the form to connect or replace it;
// when ready is false (no ARBITER_SECRET_KEY), why Teams cannot be
// connected.
func DashboardTeams(conns arbiter.TeamsService, ready bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := teamsView(r, conns, ready)
		if err != nil {
			Error(w, r, err)
			return
		}
		v.Notice = teamsNotices[r.URL.Query().Get("notice")]
		Render(w, r, http.StatusOK, dashboard.Teams(PageOf(r, "Microsoft Teams", "settings"), v))
	})
}

func teamsView(r *http.Request, conns arbiter.TeamsService, ready bool) (dashboard.TeamsView, error) {
	v := dashboard.TeamsView{Ready: ready, MessagesURL: SiteFromContext(r.Context()).AppURL + "/integrations/teams/messages"}
	if conns == nil {
		return v, nil
	}
	ctx, accountID := r.Context(), arbiter.AccountIDFromContext(r.Context())
	c, err := conns.FindTeamsConnection(ctx, accountID)
	if err != nil && arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
		return v, err
	}
	v.Connection = c
	if c != nil {
		v.AppID, v.TenantID = c.AppID, c.TenantID
		if v.Conversations, err = conns.ListTeamsConversations(ctx, accountID); err != nil {
			return v, err
		}
	}
	return v, nil
}

// DashboardTeamsConnect handles POST /settings/teams: it checks the bot's
// credentials with Microsoft's token service and stores the bot, its
// secret sealed. A refusal answers the page with why, 400 (409 without a
// key to seal with), keeping what was typed but the secret.
func DashboardTeamsConnect(conns arbiter.TeamsService, creds TeamsCredentials, ready bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, accountID := r.Context(), arbiter.AccountIDFromContext(r.Context())
		in := arbiter.TeamsConnectionInput{AppID: r.PostFormValue("app_id"), TenantID: r.PostFormValue("tenant_id"),
			ClientSecret: r.PostFormValue("client_secret")}
		err := in.Validate()
		if err == nil && (!ready || conns == nil || creds == nil) {
			err = arbiter.ErrTeamsNeedsKey
		}
		if err == nil {
			if cerr := creds.Check(in.TenantID, in.AppID, in.ClientSecret); cerr != nil {
				LoggerFromContext(ctx).Info("Microsoft's token service refused a bot's credentials", "account_id", accountID, "error", cerr.Error())
				err = arbiter.FieldErrorf("client_secret", "Microsoft did not give the bot a token with these credentials. Check the app id, the tenant and the secret's Value (not its ID) in the app registration.")
				if !teams.Permanent(cerr) {
					err = arbiter.Errorf(arbiter.EUNAVAILABLE, "Microsoft's token service could not be reached; try again in a moment.")
				}
			}
		}
		if err == nil {
			_, err = conns.ConnectTeams(ctx, accountID, in, ActorOf(r))
		}
		if code := arbiter.ErrorCode(err); code == arbiter.EINVALID || code == arbiter.ECONFLICT || code == arbiter.EUNAVAILABLE {
			v, verr := teamsView(r, conns, ready)
			if verr != nil {
				Error(w, r, verr)
				return
			}
			v.AppID, v.TenantID, v.Error = in.AppID, in.TenantID, arbiter.ErrorMessage(err)
			Render(w, r, StatusOf(err), dashboard.Teams(PageOf(r, "Microsoft Teams", "settings"), v))
			return
		} else if err != nil {
			Error(w, r, err)
			return
		}
		redirect(w, r, "/settings/teams?notice=connected")
	})
}

// DashboardTeamsDefault handles POST /settings/teams/default: the
// conversation questions go to when a task names none.
func DashboardTeamsDefault(conns arbiter.TeamsService, ready bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if conns == nil {
			Error(w, r, errTeamsOff)
			return
		}
		err := conns.SetTeamsDefault(ctx, arbiter.AccountIDFromContext(ctx), r.PostFormValue("conversation"), ActorOf(r))
		if arbiter.ErrorCode(err) == arbiter.ENOTFOUND {
			v, verr := teamsView(r, conns, ready)
			if verr != nil {
				Error(w, r, verr)
				return
			}
			v.Error = arbiter.ErrorMessage(err)
			Render(w, r, http.StatusBadRequest, dashboard.Teams(PageOf(r, "Microsoft Teams", "settings"), v))
			return
		} else if err != nil {
			Error(w, r, err)
			return
		}
		redirect(w, r, "/settings/teams?notice=default")
	})
}

// DashboardTeamsDisconnect handles POST /settings/teams/disconnect.
func DashboardTeamsDisconnect(conns arbiter.TeamsService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if conns == nil {
			Error(w, r, errTeamsOff)
			return
		}
		if err := conns.DisconnectTeams(ctx, arbiter.AccountIDFromContext(ctx), ActorOf(r)); err != nil {
			Error(w, r, err)
			return
		}
		redirect(w, r, "/settings/teams?notice=disconnected")
	})
}

// DashboardTeamsManifest handles GET /settings/teams/manifest.zip: the
// Teams app package of the account's bot, to upload to Teams.
func DashboardTeamsManifest(conns arbiter.TeamsService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if conns == nil {
			Error(w, r, errTeamsOff)
			return
		}
		c, err := conns.FindTeamsConnection(ctx, arbiter.AccountIDFromContext(ctx))
		if err != nil {
			Error(w, r, err)
			return
		}
		data, err := teams.Manifest(c.AppID, SiteFromContext(ctx).AppURL)
		if err != nil {
			Error(w, r, err)
			return
		}
		w.Header().Set("Content-Type", "application/zip")
		w.Header().Set("Content-Disposition", `attachment; filename="arbiter-teams-app.zip"`)
		w.Write(data)
	})
}

var errTeamsOff = arbiter.Errorf(arbiter.ENOTFOUND, "Microsoft Teams is not connected to this account.")
