package main

import (
	"context"

	"github.com/arbiterhq/arbiter/worker"
)

// deliverTeams starts the deliverer of the Teams outbox, when the process
// can open the bots' secrets (ARBITER_SECRET_KEY) and knows the desk its
// cards link to.
func (s *server) deliverTeams(ctx context.Context) {
	switch {
	case s.cfg.SecretKey != nil && s.cfg.ReviewURL != "":
		review := s.cfg.ReviewURL
		deliverer := worker.NewTeamsDeliverer(worker.TeamsConfig{Store: s.store, Teams: s.teams, Logger: s.logger,
			DeskURL: func(id string) string { return review + "/review/tasks/" + id }})
		s.loops.Go(func() { deliverer.Run(ctx) })
	case s.cfg.SecretKey != nil:
		s.logger.Info("this worker sends no Teams cards: ARBITER_REVIEW_URL is not set")
	}
}
