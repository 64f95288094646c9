package web

import (
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/handlers"
)

// Services are the store's services the server uses. The db package's *DB
// implements all of them.
type Services struct {
	Tasks  arbiter.TaskService
	Keys   arbiter.APIKeyService
	Demo   arbiter.DemoService
	Health arbiter.HealthService
}

// Router is the server's HTTP surface; every route is listed in Routes.
type Router struct {
	Services Services
	// KeyChecker authenticates /v1 requests.
	KeyChecker *KeyChecker
	// Logger receives one line per request and every internal error.
	Logger *slog.Logger
	// TaskCreated, when set, is called after each stored task so an
	// in-process worker can claim it at once.
	TaskCreated func()
}

// Routes returns the handler serving every route of the service.
func (rt *Router) Routes() http.Handler {
	r := chi.NewRouter()
	r.Use(requestLogger(rt.Logger), recoverer, limitBody(arbiter.MaxBodyBytes))
	r.NotFound(notFound)
	r.MethodNotAllowed(methodNotAllowed)

	r.Method(http.MethodGet, "/healthz", handlers.Healthz(rt.Services.Health))
	r.Method(http.MethodGet, "/demo/tasks", handlers.DemoTasks(rt.Services.Demo))
	r.Method(http.MethodPost, "/demo/verdicts", handlers.DemoVerdictCreate(rt.Services.Demo))

	r.Route("/v1", func(r chi.Router) {
		r.Method(http.MethodGet, "/openapi.json", handlers.OpenAPI())
		r.Group(func(r chi.Router) {
			r.Use(bearerAuth(rt.KeyChecker))
			r.Method(http.MethodPost, "/tasks", handlers.TaskCreate(rt.Services.Tasks, rt.TaskCreated))
			r.Method(http.MethodGet, "/tasks/{id}", handlers.TaskGet(rt.Services.Tasks))
		})
	})
	return r
}
