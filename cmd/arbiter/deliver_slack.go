package main

import (
	"context"

	"github.com/arbiterhq/arbiter/worker"
)

// deliverSlack starts the deliverer of the Slack outbox, when the
// process can open Slack's tokens (ARBITER_SECRET_KEY) and knows the desk
// its messages link to.
func (s *server) deliverSlack(ctx context.Context) {
	switch {
	case s.cfg.SecretKey != nil && s.cfg.ReviewURL != "":
		review := s.cfg.ReviewURL
		deliverer := worker.NewSlackDeliverer(worker.SlackConfig{Store: s.store, Slack: s.slack, Logger: s.logger,
			DeskURL: func(id string) string { return review + "/review/tasks/" + id }})
		s.loops.Go(func() { deliverer.Run(ctx) })
	case s.cfg.SecretKey != nil:
		s.logger.Info("this worker sends no Slack messages: ARBITER_REVIEW_URL is not set")
	}
}
