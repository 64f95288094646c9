package main

import (
	"context"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/mail"
	"github.com/arbiterhq/arbiter/worker"
)

// deliverMail starts the deliverer of the mail outbox (reminders, rungs,
// digests, drift mails), when the process knows the reviewer site its
// mails link to; another process that knows it sends them otherwise.
func (s *server) deliverMail(ctx context.Context) {
	if s.cfg.ReviewURL == "" {
		s.logger.Info("this worker delivers no reminders or other mail of the outbox: ARBITER_REVIEW_URL is not set")
		return
	}
	links := arbiter.MailLinks{QueueURL: s.cfg.ReviewURL + "/review"}
	if s.cfg.AppURL != "" {
		links.ReportURL = s.cfg.AppURL + "/calibration"
	}
	deliverer := worker.NewMailDeliverer(worker.MailConfig{Store: s.store, Mail: s.mailer, Permanent: mail.Permanent,
		Links: links, Logger: s.logger})
	s.loops.Go(func() { deliverer.Run(ctx) })
}
