package web

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/config"
	"github.com/arbiterhq/arbiter/handlers"
	"github.com/arbiterhq/arbiter/internal/limits"
	"github.com/arbiterhq/arbiter/slack"
	"github.com/arbiterhq/arbiter/static"
	"github.com/arbiterhq/arbiter/teams"
)

// Services are the store's services the server uses. The db package's *DB
// implements all of them.
type Services struct {
	Tasks  arbiter.TaskService
	Keys   arbiter.APIKeyService
	Demo   arbiter.DemoService
	Health arbiter.HealthService
	// Ready answers /readyz: whether this process should be sent traffic.
	Ready arbiter.ReadinessService
	Queue arbiter.QueueService // the human queue of the reviewer site
	// Watcher wakes task reads that wait for a final state; nil, they
	// wait out their time.
	Watcher arbiter.TaskWatcher

	// The dashboard's: accounts' usage, sign-in links, identities and the
	// audit log. Sessions are reached through Router.Sessions.
	Accounts   arbiter.AccountService
	Logins     arbiter.LoginTokenService
	Identities arbiter.IdentityService
	Audit      arbiter.AuditService
	// Members keeps accounts' members and invitations.
	Members arbiter.MemberService
	// Reservations keeps who works on which task of the review queue.
	Reservations arbiter.ReservationService
	// Stats reads what the desk's stats summarize.
	Stats arbiter.StatsService
	// Webhooks manages the account's webhook endpoints and delivery log.
	Webhooks arbiter.WebhookService
	// Calibration reads the labelled pairs of the calibration report and
	// keeps the accounts' audit rates.
	Calibration arbiter.CalibrationService
	// Policies keeps the accounts' policies per task type.
	Policies arbiter.PolicyService
	// Slack keeps accounts' Slack connections; nil hides the Slack
	// settings page.
	Slack arbiter.SlackService
	// DecisionLinks finds and uses digests' decision links; nil serves
	// none.
	DecisionLinks arbiter.DecisionLinkService
	// ChatLinks links chat users (Slack's, Teams') to people; nil
	// serves no link page.
	ChatLinks arbiter.ChatLinkService
	// Teams keeps accounts' Microsoft Teams bots; nil hides the Teams
	// settings.
	Teams arbiter.TeamsService
	// Executions records the claims on tasks' approved actions' execution;
	// nil serves no /v1/tasks/{id}/execution.
	Executions arbiter.ExecutionService
	// Agreement reads the votes of the reviewers' agreement report.
	Agreement arbiter.AgreementService
	// Receipts serves the public keys of receipts (the JWKS); nil serves
	// none.
	Receipts arbiter.ReceiptService
	// AuditExport streams accounts' audit exports; nil serves none.
	AuditExport arbiter.AuditExportService
	// Backtests keeps the accounts' backtest runs; nil shows none on the
	// calibration page.
	Backtests arbiter.BacktestService
}

// Router is the server's HTTP surface; every route is listed in Routes and
// the functions it calls below.
type Router struct {
	Services Services
	// KeyChecker authenticates /v1 requests.
	KeyChecker *KeyChecker
	// Logger receives one line per request and every internal error.
	Logger *slog.Logger
	// TaskCreated, when set, is called with the number of tasks a create
	// or a batch stored (replays not counted), so an in-process worker can
	// claim them at once and metrics count them.
	TaskCreated func(n int)
	// Metrics, when set, records every request by route pattern, method
	// and status (metrics.Metrics).
	Metrics RequestObserver
	// Tracing makes a span of every request (internal/telemetry), when
	// the process exports traces.
	Tracing bool
	// ShuttingDown, closed when the server begins to shut down, answers
	// the requests waiting for a task at once with the task as it is.
	ShuttingDown <-chan struct{}
	// Parking, when set, parks the HTTP/1.1 requests that wait for a task
	// off their goroutine until they are answered (see ParkingLot); its
	// Listener must be served by the same server.
	Parking *ParkingLot
	// Waiters bounds the requests waiting for a task per API key and per
	// account; nil gets arbiter.DefaultMaxWaitersPerKey and
	// DefaultMaxWaitersPerAccount made of Limits (limits.Waiters: one
	// budget for the deployment when they are shared). A ConnLimiter whose
	// ConnContext the server calls may evict them (see Waiters).
	Waiters arbiter.WaiterLimiter

	// Site holds the origins of the API, the dashboard and the reviewer
	// site. When they name different hosts, requests are dispatched by
	// host, and a host that is none of them gets the API. Empty origins
	// mean config.DefaultOrigin.
	Site handlers.Site
	// Sessions signs people in to the dashboard and the reviewer site; nil
	// serves the API alone.
	Sessions *Sessions
	// Providers are the identity providers offered at sign-in.
	Providers []handlers.OAuthProvider
	// Mailer delivers e-mail sign-in links.
	Mailer arbiter.LoginMailer
	// Limits make the limits stated per client, key, account or
	// workspace: shared by every process of a Postgres deployment
	// (internal/limits); nil keeps them in this process (limits.Local on
	// the pages' clock). The fields below that are left nil are made
	// from it when Routes is called.
	Limits limits.Limits
	// SignInLimits bound how often sign-in links are sent; nil limiters
	// get DefaultSignInLimits.
	SignInLimits handlers.SignInLimits
	// Now is the pages' clock (default time.Now).
	Now arbiter.Clock
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names
	// the client; empty, the client is the connection's peer.
	TrustedProxies []netip.Prefix
	// Backtester starts the calibration page's backtests with the
	// server's verifiers file; nil (no file) shows no form, and a post
	// is answered that the server has none.
	Backtester arbiter.BacktestStarter
	// DemoLimit bounds the demo verdicts of each client IP, through the API
	// and the demo desk's form together; nil gets DefaultDemoLimit.
	DemoLimit arbiter.RateLimit
	// MCPCalls bounds the /v1/mcp calls of each account at once; nil gets
	// DefaultMCPCalls.
	MCPCalls arbiter.SlotLimit
	// WebhookAllowPrivate lets webhook endpoints' and tasks' callback URLs
	// be http:// and name private addresses
	// (ARBITER_WEBHOOK_ALLOW_PRIVATE), for development.
	WebhookAllowPrivate bool
	// Slack answers the interactions of Slack apps connected in HTTP
	// mode, at the app origin's /integrations/slack/interactions; nil
	// serves no such route.
	Slack *slack.Interactions
	// SlackTeams checks a bot token when an account connects Slack.
	SlackTeams handlers.SlackTeams
	// SlackSealed reports whether the store seals secrets
	// (ARBITER_SECRET_KEY), without which Slack cannot be connected.
	SlackSealed bool
	// SlackFailureLimits bound the interactions that fail their
	// signature check; nil limiters get DefaultSlackFailureLimits.
	SlackFailureLimits handlers.SlackFailureLimits

	// Teams answers the activities Teams posts to accounts' bots, at the
	// app origin's /integrations/teams/messages, once TeamsVerifier
	// verified them; nil serves no messaging endpoint.
	Teams         *teams.Bot
	TeamsVerifier *teams.Verifier
	// TeamsCredentials checks a bot's credentials when an account
	// connects Teams.
	TeamsCredentials handlers.TeamsCredentials
	// TeamsSealed reports whether the store seals secrets
	// (ARBITER_SECRET_KEY), without which Teams cannot be connected.
	TeamsSealed bool
	// TeamsFailures bounds the activities whose token fails its check,
	// per client address; nil gets DefaultTeamsFailures.
	TeamsFailures arbiter.RateLimit
}

// DefaultTeamsFailures allows a client address 10 activities whose token
// fails its check at once, and one more every 6 seconds: Teams' own never
// fail. It is made of l.
func DefaultTeamsFailures(l limits.Limits) arbiter.RateLimit {
	return l.Rate("teams-failures", 10, 6*time.Second)
}

// DefaultSlackFailureLimits allow one client address 10 failed signature
// checks for a workspace at once and one more every 6 seconds, and a
// workspace 60 from everywhere at once and one more a second: Slack's
// own requests never fail, and holding a workspace's ceiling down takes
// six clients at their limit. They are made of l.
func DefaultSlackFailureLimits(l limits.Limits) handlers.SlackFailureLimits {
	return handlers.SlackFailureLimits{
		ByTeamAndClient: l.Rate("slack-failures-client", 10, 6*time.Second),
		ByTeam:          l.Rate("slack-failures", 60, time.Second),
	}
}

// DefaultDemoLimit allows a client IP 10 demo verdicts at once and one more
// every 2 seconds. It is made of l.
func DefaultDemoLimit(l limits.Limits) arbiter.RateLimit {
	return l.Rate("demo-verdicts", 10, 2*time.Second)
}

// DefaultMCPCalls allows an account handlers.MaxMCPCalls /v1/mcp calls at
// once. It is made of l.
func DefaultMCPCalls(l limits.Limits) arbiter.SlotLimit {
	return l.Slots("mcp-calls", handlers.MaxMCPCalls)
}

// DefaultSignInLimits allow a client IP 20 sign-in links at once and one
// more every 30 seconds; a client IP 5 links for one address at once and one
// more every 3 minutes; and an address 10 links from everywhere at once and
// one more a minute. Holding an address's ceiling empty takes more than one
// request a minute, which one client IP, held to one every 3 minutes for
// that address, cannot send. They are made of l.
func DefaultSignInLimits(l limits.Limits) handlers.SignInLimits {
	return handlers.SignInLimits{
		ByIP:           l.Rate("signin-client", 20, 30*time.Second),
		ByAddressAndIP: l.Rate("signin-address-client", 5, 3*time.Minute),
		ByAddress:      l.Rate("signin-address", 10, time.Minute),
	}
}

// limits returns the router's Limits, in this process on the pages'
// clock when none were given.
func (rt *Router) limits() limits.Limits {
	if rt.Limits == nil {
		rt.Limits = limits.Local{Now: rt.now()}
	}
	return rt.Limits
}

// Routes returns the handler serving every route of the service.
func (rt *Router) Routes() http.Handler {
	site := rt.site()
	if rt.DemoLimit == nil {
		rt.DemoLimit = DefaultDemoLimit(rt.limits())
	}
	if rt.MCPCalls == nil {
		rt.MCPCalls = DefaultMCPCalls(rt.limits())
	}
	if rt.SlackFailureLimits.ByTeam == nil || rt.SlackFailureLimits.ByTeamAndClient == nil {
		rt.SlackFailureLimits = DefaultSlackFailureLimits(rt.limits())
	}
	if rt.TeamsFailures == nil {
		rt.TeamsFailures = DefaultTeamsFailures(rt.limits())
	}
	surfaces := []struct {
		origin string
		mount  func(chi.Router, handlers.Site)
	}{
		{site.BaseURL, rt.apiRoutes},
		{site.AppURL, rt.dashboardRoutes},
		{site.ReviewURL, rt.reviewRoutes},
	}
	byHost := map[string]*chi.Mux{}
	for _, s := range surfaces {
		host := hostOf(s.origin)
		mux, ok := byHost[host]
		if !ok {
			mux = rt.newMux(site)
			byHost[host] = mux
		}
		s.mount(mux, site)
	}
	api := byHost[hostOf(site.BaseURL)]
	if len(byHost) == 1 {
		return api
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if mux, ok := byHost[strings.ToLower(r.Host)]; ok {
			mux.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}

// newMux returns a router with the middleware every host shares and the
// static files. HEAD is answered wherever GET is. Routes bound the
// header (limitHeader) once they say how they answer failures.
func (rt *Router) newMux(site handlers.Site) *chi.Mux {
	r := chi.NewRouter()
	// The metrics inside the request log, whose context tells them of a
	// parked request (handlers.AnswerLater).
	if rt.Tracing {
		r.Use(traceRequests)
	}
	r.Use(clientIP(rt.TrustedProxies), requestLogger(rt.Logger, rt.TrustedProxies))
	if rt.Metrics != nil {
		r.Use(observeRequests(rt.Metrics))
	}
	r.Use(recoverer, limitBody(arbiter.MaxBodyBytes), securityHeaders(strings.HasPrefix(site.AppURL, "https://"), site.AppURL, site.ReviewURL),
		middleware.GetHead)
	r.NotFound(notFound)
	r.MethodNotAllowed(methodNotAllowed(r))
	r.Method(http.MethodGet, static.Prefix+"*", static.Handler())
	return r
}

// apiRoutes are the JSON API's, at the API's origin.
func (rt *Router) apiRoutes(r chi.Router, _ handlers.Site) {
	r.Group(func(r chi.Router) {
		r.Use(handlers.API, limitHeader)
		r.Method(http.MethodGet, "/healthz", handlers.Healthz(rt.Services.Health))
		r.Method(http.MethodHead, "/healthz", handlers.Healthz(rt.Services.Health))
		// Kubernetes' probes: /livez asks nothing of the store, /readyz
		// whether this process should be sent traffic.
		r.Method(http.MethodGet, "/livez", handlers.Livez())
		r.Method(http.MethodHead, "/livez", handlers.Livez())
		r.Method(http.MethodGet, "/readyz", handlers.Readyz(rt.ready()))
		r.Method(http.MethodHead, "/readyz", handlers.Readyz(rt.ready()))
		r.Method(http.MethodGet, "/demo/tasks", handlers.DemoTasks(rt.Services.Demo))
		r.Method(http.MethodPost, "/demo/verdicts", handlers.DemoVerdictCreate(rt.Services.Demo, rt.DemoLimit))
		// What an MCP client that meets a 401 on /v1/mcp looks for: keys
		// are the only way in, and there is no OAuth.
		prm := handlers.OAuthProtectedResource(rt.site().BaseURL)
		r.Method(http.MethodGet, "/.well-known/oauth-protected-resource", prm)
		r.Method(http.MethodGet, "/.well-known/oauth-protected-resource/v1/mcp", prm)
		if rt.Services.Receipts != nil {
			// Anyone may verify a receipt: the public keys need no key.
			r.Method(http.MethodGet, "/.well-known/arbiter/jwks.json", handlers.ReceiptKeysGet(rt.Services.Receipts))
		}
	})
	r.Route("/v1", func(r chi.Router) {
		r.Use(handlers.API, limitHeader)
		r.Method(http.MethodGet, "/openapi.json", handlers.OpenAPI())
		r.Group(func(r chi.Router) {
			r.Use(bearerAuth(rt.KeyChecker))
			r.Method(http.MethodPost, "/tasks", handlers.TaskCreate(rt.Services.Tasks, rt.TaskCreated, rt.WebhookAllowPrivate))
			// Every method: GET /v1/tasks/batch is no task to read.
			r.Handle("/tasks/batch", only(http.MethodPost, handlers.TaskBatchCreate(rt.Services.Tasks, rt.TaskCreated, rt.WebhookAllowPrivate)))
			r.Method(http.MethodGet, "/tasks", handlers.TaskList(rt.Services.Tasks))
			// One admission for both ways of waiting: a key's waits count
			// together.
			waiters := rt.waiters()
			r.Method(http.MethodGet, "/tasks/{id}", handlers.TaskGet(rt.Services.Tasks, rt.Services.Watcher, rt.ShuttingDown, waiters, rt.parker()))
			if rt.Services.Executions != nil {
				r.Method(http.MethodPost, "/tasks/{id}/execution", handlers.TaskExecutionClaim(rt.Services.Executions))
			}
			// Agents' tools over MCP (Streamable HTTP); it answers 405
			// itself to the methods it does not take.
			r.Handle("/mcp", handlers.MCP(rt.Services.Tasks, rt.Services.Watcher, rt.MCPCalls, rt.ShuttingDown, rt.TaskCreated, waiters))
			r.Method(http.MethodGet, "/calibration", handlers.CalibrationGet(rt.Services.Calibration))
			// An API key acts for the account, as its owners and admins
			// do; reviewers hold no keys (ActionManageKeys).
			r.Method(http.MethodGet, "/policies", handlers.PolicyList(rt.Services.Policies))
			r.Method(http.MethodGet, "/policies/{task_type}", handlers.PolicyGet(rt.Services.Policies))
			r.Method(http.MethodPut, "/policies/{task_type}", handlers.PolicyPut(rt.Services.Policies))
			r.Method(http.MethodDelete, "/policies/{task_type}", handlers.PolicyDelete(rt.Services.Policies))
			r.Method(http.MethodGet, "/agreement", handlers.AgreementGet(rt.Services.Agreement, rt.now()))
			if rt.Services.AuditExport != nil {
				r.Method(http.MethodGet, "/audit/export", handlers.AuditExport(rt.Services.AuditExport))
			}
		})
	})
}

// pageMiddleware is what every cookie-authenticated page shares: the site's
// origins, failures answered as pages, CSRF protection, the form read and
// checked once, and the session.
func (rt *Router) pageMiddleware(r chi.Router, site handlers.Site) {
	csrf, err := crossOriginProtection(site.AppURL, site.ReviewURL)
	if err != nil {
		panic(err) // the origins were validated by config.FromEnv
	}
	r.Use(handlers.Pages, limitHeader, withSite(site), csrf, readForms, rt.Sessions.Load)
}

// dashboardRoutes are the account dashboard's, at the app origin: sign-in,
// the overview, tasks, API keys, webhooks, the audit log, the settings
// and the calibration report.
func (rt *Router) dashboardRoutes(r chi.Router, site handlers.Site) {
	if rt.Teams != nil && rt.TeamsVerifier != nil && rt.Services.Teams != nil {
		// Signed by the Bot Framework, not a cookie: no session, no CSRF.
		r.With(handlers.API, limitHeader).Method(http.MethodPost, "/integrations/teams/messages",
			handlers.TeamsMessages(rt.Teams, rt.TeamsVerifier, rt.Services.Teams, rt.TeamsFailures))
	}
	if rt.Slack != nil {
		// Signed by Slack, not a cookie: no session, no CSRF check.
		r.With(handlers.API, limitHeader).Method(http.MethodPost, "/integrations/slack/interactions",
			handlers.SlackInteractions(rt.Slack, rt.SlackFailureLimits))
	}
	if rt.Sessions == nil {
		return
	}
	s, now := rt.Services, rt.now()
	limits := rt.SignInLimits
	if limits.ByIP == nil || limits.ByAddressAndIP == nil || limits.ByAddress == nil {
		limits = DefaultSignInLimits(rt.limits())
	}
	r.Group(func(r chi.Router) {
		rt.pageMiddleware(r, site)
		r.Method(http.MethodGet, "/signin", handlers.AuthSignIn(rt.Providers))
		r.Method(http.MethodPost, "/signin/email", handlers.AuthEmailRequest(s.Logins, rt.Mailer, limits, rt.Providers))
		r.Method(http.MethodGet, "/signin/email/confirm", handlers.AuthEmailConfirm(s.Logins))
		r.Method(http.MethodPost, "/signin/email/confirm", handlers.AuthEmailSignIn(s.Logins, s.Identities, rt.Sessions))
		r.Method(http.MethodGet, "/auth/{provider}", handlers.AuthOAuthBegin(rt.Providers, rt.Sessions))
		r.Method(http.MethodGet, "/auth/{provider}/callback", handlers.AuthOAuthCallback(rt.Providers, s.Identities, rt.Sessions))
		if s.ChatLinks != nil {
			// The person who opens it must sign in: that is the proof.
			r.With(requireSession).Method(http.MethodGet, "/chat-links/{token}", handlers.ChatLinkShow(s.ChatLinks))
			r.With(requireSession).Method(http.MethodPost, "/chat-links/{token}", handlers.ChatLinkUse(s.ChatLinks))
		}
		r.Method(http.MethodPost, "/signout", handlers.AuthSignOut(rt.Sessions, s.Audit))
		r.Method(http.MethodGet, "/invitations/accept", handlers.InvitationShow(s.Members))

		r.Group(func(r chi.Router) {
			r.Use(requireSession)
			r.Method(http.MethodPost, "/account", handlers.AccountSwitch(rt.Sessions))
			r.Method(http.MethodPost, "/invitations/accept", handlers.InvitationAccept(s.Members, rt.Sessions))
			r.Method(http.MethodGet, "/account/deleted", handlers.DashboardAccountDeleted())
			r.Method(http.MethodGet, "/me", handlers.DashboardPerson(rt.Sessions.IdleLimit()))
			r.Method(http.MethodPost, "/me/signout-everywhere", handlers.DashboardSignOutEverywhere(rt.Sessions, s.Audit))
		})
		// Every page of an account checks the role of the person in it
		// (arbiter.Can); a page the role may not see is not found.
		r.Group(func(r chi.Router) {
			r.Use(requireSession, requireAccount)
			r.Method(http.MethodGet, "/", handlers.DashboardHome(s.Accounts, s.Keys, s.Calibration))
			r.With(allow(arbiter.ActionManageKeys)).Method(http.MethodGet, "/keys", handlers.DashboardKeys(s.Keys, now))
			r.With(allow(arbiter.ActionManageKeys)).Method(http.MethodPost, "/keys", handlers.DashboardKeyCreate(s.Keys, now))
			r.With(allow(arbiter.ActionManageKeys)).Method(http.MethodGet, "/keys/{id}/revoke", handlers.DashboardKeyRevokeConfirm(s.Keys))
			r.With(allow(arbiter.ActionManageKeys)).Method(http.MethodPost, "/keys/{id}/revoke", handlers.DashboardKeyRevoke(s.Keys))
			r.With(allow(arbiter.ActionViewTasks)).Method(http.MethodGet, "/tasks", handlers.DashboardTasks(s.Tasks, now))
			r.With(allow(arbiter.ActionViewTasks)).Method(http.MethodGet, "/tasks/{id}", handlers.DashboardTask(s.Tasks, now))
			r.With(allow(arbiter.ActionViewAudit)).Method(http.MethodGet, "/audit", handlers.DashboardAudit(s.Audit, now))
			r.With(allow(arbiter.ActionManageSettings)).Method(http.MethodGet, "/settings", handlers.DashboardSettings(s.Accounts))
			r.With(allow(arbiter.ActionManageSettings)).Method(http.MethodPost, "/settings", handlers.DashboardSettingsSave(s.Accounts))
			r.With(allow(arbiter.ActionDeleteAccount)).Method(http.MethodPost, "/settings/delete", handlers.DashboardAccountDelete(s.Accounts))
			r.With(allow(arbiter.ActionManageMembers)).Method(http.MethodGet, "/members", handlers.DashboardMembers(s.Members, now))
			r.With(allow(arbiter.ActionManageMembers)).Method(http.MethodPost, "/members/invite", handlers.DashboardMemberInvite(s.Members, rt.Mailer, now))
			r.With(allow(arbiter.ActionManageMembers)).Method(http.MethodPost, "/members/{id}/role", handlers.DashboardMemberRole(s.Members, now))
			r.With(allow(arbiter.ActionManageMembers)).Method(http.MethodPost, "/members/{id}/remove", handlers.DashboardMemberRemove(s.Members, now))
			r.With(allow(arbiter.ActionManageMembers)).Method(http.MethodPost, "/invitations/{id}/revoke", handlers.DashboardInvitationRevoke(s.Members, now))
			// The addresses forms post to lead to their page when opened.
			for _, f := range []struct {
				address, page string
				action        arbiter.Action
			}{
				{"/members/invite", "/members", arbiter.ActionManageMembers},
				{"/members/{id}/role", "/members", arbiter.ActionManageMembers},
				{"/members/{id}/remove", "/members", arbiter.ActionManageMembers},
				{"/invitations/{id}/revoke", "/members", arbiter.ActionManageMembers},
				{"/settings/delete", "/settings", arbiter.ActionDeleteAccount},
				{"/calibration/apply", "/calibration", arbiter.ActionManagePolicies},
				{"/calibration/backtests", "/calibration", arbiter.ActionBacktest},
				{"/settings/slack/disconnect", "/settings/slack", arbiter.ActionManageSettings},
				{"/settings/teams/disconnect", "/settings/teams", arbiter.ActionManageSettings},
				{"/settings/teams/default", "/settings/teams", arbiter.ActionManageSettings},
				{"/webhooks/callback-secret/reveal", "/webhooks", arbiter.ActionManageWebhooks},
				{"/webhooks/callback-secret/rotate", "/webhooks", arbiter.ActionManageWebhooks},
				{"/webhooks/{id}/edit", "/webhooks/{id}", arbiter.ActionManageWebhooks},
				{"/webhooks/{id}/reveal", "/webhooks/{id}", arbiter.ActionManageWebhooks},
				{"/webhooks/{id}/rotate", "/webhooks/{id}", arbiter.ActionManageWebhooks},
			} {
				r.With(allow(f.action)).Method(http.MethodGet, f.address, handlers.DashboardFormAddress(f.page))
			}
			rt.webhookRoutes(r, now)
			r.With(allow(arbiter.ActionViewCalibration)).Method(http.MethodGet, "/calibration", handlers.DashboardCalibration(s.Calibration, s.Policies, s.Backtests, rt.Backtester, now))
			if s.Backtests != nil {
				r.With(allow(arbiter.ActionBacktest)).Method(http.MethodPost, "/calibration/backtests", handlers.DashboardBacktestStart(rt.Backtester))
				r.With(allow(arbiter.ActionBacktest)).Method(http.MethodGet, "/calibration/backtests/{id}", handlers.DashboardBacktestRun(s.Backtests, now))
			}
			r.With(allow(arbiter.ActionManagePolicies)).Method(http.MethodPost, "/calibration/apply", handlers.DashboardCalibrationApply(s.Policies))
			r.With(allow(arbiter.ActionManageSettings)).Method(http.MethodGet, "/settings/audit", handlers.DashboardAuditSettings(s.Calibration))
			r.With(allow(arbiter.ActionManageSettings)).Method(http.MethodPost, "/settings/audit", handlers.DashboardAuditSettingsUpdate(s.Calibration))
			r.With(allow(arbiter.ActionManagePolicies)).Method(http.MethodGet, "/settings/policies", handlers.DashboardPolicies(s.Policies))
			r.With(allow(arbiter.ActionManagePolicies)).Method(http.MethodGet, "/settings/policy", handlers.DashboardPolicy(s.Policies))
			r.With(allow(arbiter.ActionManagePolicies)).Method(http.MethodPost, "/settings/policy", handlers.DashboardPolicySave(s.Policies))
			r.With(allow(arbiter.ActionManagePolicies)).Method(http.MethodGet, "/settings/policy/delete", handlers.DashboardPolicyDeleteConfirm(s.Policies))
			r.With(allow(arbiter.ActionManagePolicies)).Method(http.MethodPost, "/settings/policy/delete", handlers.DashboardPolicyDelete(s.Policies))
			r.With(allow(arbiter.ActionManageSettings)).Method(http.MethodGet, "/settings/slack", handlers.DashboardSlack(s.Slack, rt.slackReady()))
			r.With(allow(arbiter.ActionManageSettings)).Method(http.MethodPost, "/settings/slack", handlers.DashboardSlackConnect(s.Slack, rt.SlackTeams, rt.slackReady()))
			r.With(allow(arbiter.ActionManageSettings)).Method(http.MethodPost, "/settings/slack/disconnect", handlers.DashboardSlackDisconnect(s.Slack))
			r.With(allow(arbiter.ActionManageSettings)).Method(http.MethodGet, "/settings/teams", handlers.DashboardTeams(s.Teams, rt.teamsReady()))
			r.With(allow(arbiter.ActionManageSettings)).Method(http.MethodPost, "/settings/teams", handlers.DashboardTeamsConnect(s.Teams, rt.TeamsCredentials, rt.teamsReady()))
			r.With(allow(arbiter.ActionManageSettings)).Method(http.MethodPost, "/settings/teams/default", handlers.DashboardTeamsDefault(s.Teams, rt.teamsReady()))
			r.With(allow(arbiter.ActionManageSettings)).Method(http.MethodPost, "/settings/teams/disconnect", handlers.DashboardTeamsDisconnect(s.Teams))
			r.With(allow(arbiter.ActionManageSettings)).Method(http.MethodGet, "/settings/teams/manifest.zip", handlers.DashboardTeamsManifest(s.Teams))
		})
	})
}

// webhookRoutes are the dashboard's webhook pages: the endpoints and the
// callback secret, each endpoint with its actions and delivery log, for
// the roles that may manage webhooks (the others are not found). Every
// write is a form post; secrets are shown in answer to a post only.
func (rt *Router) webhookRoutes(r chi.Router, now arbiter.Clock) {
	hooks, private := rt.Services.Webhooks, rt.WebhookAllowPrivate
	r = r.With(allow(arbiter.ActionManageWebhooks))
	r.Method(http.MethodGet, "/webhooks", handlers.DashboardWebhooks(hooks, private, now))
	r.Method(http.MethodPost, "/webhooks", handlers.DashboardWebhookCreate(hooks, private, now))
	r.Method(http.MethodPost, "/webhooks/callback-secret/reveal", handlers.DashboardCallbackSecretReveal(hooks, private, now))
	r.Method(http.MethodPost, "/webhooks/callback-secret/rotate", handlers.DashboardCallbackSecretRotate(hooks))
	r.Method(http.MethodGet, "/webhooks/{id}", handlers.DashboardWebhook(hooks, private, now))
	r.Method(http.MethodPost, "/webhooks/{id}/edit", handlers.DashboardWebhookEdit(hooks, private, now))
	r.Method(http.MethodPost, "/webhooks/{id}/reveal", handlers.DashboardWebhookReveal(hooks, private, now))
	r.Method(http.MethodPost, "/webhooks/{id}/rotate", handlers.DashboardWebhookRotate(hooks))
	r.Method(http.MethodPost, "/webhooks/{id}/ping", handlers.DashboardWebhookPing(hooks))
	r.Method(http.MethodPost, "/webhooks/{id}/enabled", handlers.DashboardWebhookEnable(hooks))
	r.Method(http.MethodPost, "/webhooks/{id}/delete", handlers.DashboardWebhookDelete(hooks))
	r.Method(http.MethodPost, "/webhooks/{id}/resend-failed", handlers.DashboardWebhookResendFailed(hooks, private, now))
	r.Method(http.MethodGet, "/webhooks/{id}/messages/{msg}", handlers.DashboardWebhookMessage(hooks, now))
	r.Method(http.MethodPost, "/webhooks/{id}/messages/{msg}/resend", handlers.DashboardWebhookResend(hooks))
}

// reviewRoutes are the reviewer site's, under /review at the review
// origin; on a host of its own, / leads there. Signed-in people review their
// account's queue; anyone can review the demo queue.
func (rt *Router) reviewRoutes(r chi.Router, site handlers.Site) {
	if rt.Sessions == nil {
		return
	}
	if hostOf(site.ReviewURL) != hostOf(site.AppURL) {
		r.Method(http.MethodGet, "/", http.RedirectHandler("/review", http.StatusFound))
	}
	s, now := rt.Services, rt.now()
	r.Route("/review", func(r chi.Router) {
		rt.pageMiddleware(r, site)
		r.Method(http.MethodGet, "/", handlers.ReviewHome(s.Queue, s.Demo, now))
		r.Method(http.MethodGet, "/queue", handlers.ReviewQueue(s.Queue, now))
		r.Method(http.MethodGet, "/count", handlers.ReviewCount(s.Queue))
		r.Method(http.MethodGet, "/demo", handlers.ReviewDemo(s.Demo))
		r.Method(http.MethodGet, "/demo/tasks/{id}", handlers.ReviewDemoTask(s.Demo, now))
		r.Method(http.MethodPost, "/demo/tasks/{id}", handlers.ReviewDemoVerdict(s.Demo, rt.DemoLimit, now))
		r.Method(http.MethodGet, "/demo/done", handlers.ReviewDemoDone(s.Demo))
		r.Method(http.MethodGet, "/demo/calibration", handlers.ReviewDemoCalibration(s.Calibration, now))
		if s.DecisionLinks != nil {
			// The token is the credential: no session needed.
			r.Method(http.MethodGet, "/links/{token}", handlers.DecisionLinkShow(s.DecisionLinks))
			r.Method(http.MethodPost, "/links/{token}", handlers.DecisionLinkUse(s.DecisionLinks))
		}
		if s.ChatLinks != nil {
			// The person who opens it must sign in: that is the proof.
			r.With(requireSession).Method(http.MethodGet, "/chat-links/{token}", handlers.ChatLinkShow(s.ChatLinks))
			r.With(requireSession).Method(http.MethodPost, "/chat-links/{token}", handlers.ChatLinkUse(s.ChatLinks))
		}
		r.Method(http.MethodPost, "/signout", handlers.AuthSignOut(rt.Sessions, s.Audit))
		r.With(requireSession).Method(http.MethodPost, "/account", handlers.AccountSwitch(rt.Sessions))
		r.Group(func(r chi.Router) {
			r.Use(requireSession, requireAccount, allow(arbiter.ActionReview))
			r.Method(http.MethodGet, "/tasks/{id}", handlers.ReviewTask(s.Tasks, s.Queue, s.Reservations, now))
			r.Method(http.MethodPost, "/tasks/{id}", handlers.ReviewDecide(s.Tasks, s.Queue, s.Reservations, now))
			r.Method(http.MethodPost, "/tasks/{id}/reservation", handlers.ReviewReservation(s.Reservations))
			r.Method(http.MethodPost, "/tasks/{id}/skip", handlers.ReviewSkip(s.Tasks, s.Queue, s.Reservations, now))
			r.Method(http.MethodPost, "/bulk", handlers.ReviewBulk(s.Tasks, s.Queue))
		})
		r.With(requireSession, requireAccount, allow(arbiter.ActionViewStats)).
			Method(http.MethodGet, "/stats", handlers.ReviewStats(s.Stats, s.Agreement, now))
	})
}

// slackReady reports whether accounts may connect Slack here: the store
// keeps Slack connections and seals their tokens.
func (rt *Router) slackReady() bool {
	return rt.Services.Slack != nil && rt.SlackTeams != nil && rt.SlackSealed
}

// teamsReady reports whether accounts may connect Teams here: the store
// keeps Teams bots and seals their secrets.
func (rt *Router) teamsReady() bool {
	return rt.Services.Teams != nil && rt.TeamsCredentials != nil && rt.TeamsSealed
}

// site returns the configured origins, defaulted.
func (rt *Router) site() handlers.Site {
	s := rt.Site
	for _, o := range []*string{&s.BaseURL, &s.AppURL, &s.ReviewURL} {
		if *o == "" {
			*o = config.DefaultOrigin
		}
	}
	return s
}

// now returns the pages' clock.
func (rt *Router) now() arbiter.Clock {
	if rt.Now == nil {
		return time.Now
	}
	return rt.Now
}

// hostOf returns the lower-cased host[:port] of an origin.
func hostOf(origin string) string {
	u, err := url.Parse(origin)
	if err != nil {
		return origin
	}
	return strings.ToLower(u.Host)
}

// waiters returns the admission of waiting requests.
func (rt *Router) waiters() handlers.Waiters {
	if rt.Waiters == nil {
		rt.Waiters = limits.Waiters(rt.limits(), arbiter.DefaultMaxWaitersPerKey, arbiter.DefaultMaxWaitersPerAccount)
	}
	return Waiters{Limits: rt.Waiters, Keys: rt.KeyChecker}
}

// parker returns the parking lot of waiting requests, or nil.
func (rt *Router) parker() handlers.Parker {
	if rt.Parking == nil {
		return nil
	}
	return rt.Parking
}

// ready is what /readyz asks: Services.Ready, or else the health service
// when it can say (the store can), or else a process that answers is
// ready.
func (rt *Router) ready() arbiter.ReadinessService {
	if rt.Services.Ready != nil {
		return rt.Services.Ready
	}
	if r, ok := rt.Services.Health.(arbiter.ReadinessService); ok {
		return r
	}
	return alwaysReady{}
}

// alwaysReady is the readiness of a router given no way to tell.
type alwaysReady struct{}

// Ready returns nil.
func (alwaysReady) Ready(context.Context) error { return nil }
