package main

import (
	"context"

	"github.com/arbiterhq/arbiter/worker"
)

// deliverWebhooks starts the deliverer of the webhook outbox.
func (s *server) deliverWebhooks(ctx context.Context) {
	var observer worker.WebhookObserver
	if s.metrics != nil {
		observer = s.metrics
	}
	deliverer := worker.NewDeliverer(worker.WebhookConfig{
		Store: s.store, Queued: s.store.WebhooksQueued(), AllowPrivate: s.cfg.WebhookAllowPrivate,
		Logger: s.logger, Observer: observer,
	})
	s.loops.Go(func() { deliverer.Run(ctx) })
}
