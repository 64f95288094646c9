package worker

import "time"

// NewWebhookClientResolving is NewWebhookClient looking names up with the
// resolver given, for tests that must not query DNS.
var NewWebhookClientResolving = newWebhookClient

// PaceChannel takes and gives back the channel key's turn, as a message
// sent to it does, and returns how many channels' turns d keeps.
func (d *SlackDeliverer) PaceChannel(key string) (wait time.Duration, kept int) {
	if wait = d.reserve(key); wait == 0 {
		d.done(key, d.cfg.Pace)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return wait, len(d.turns)
}
