package worker

import "time"

// NewWebhookClientResolving is NewWebhookClient looking names up with the
// resolver given, for tests that must not query DNS.
var NewWebhookClientResolving = newWebhookClient

// Lease returns how long the deliverer's claims hold.
func (d *SlackDeliverer) Lease() time.Duration { return d.cfg.Lease }

// Lease returns how long the deliverer's claims hold.
func (d *TeamsDeliverer) Lease() time.Duration { return d.cfg.Lease }
