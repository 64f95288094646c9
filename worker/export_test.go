package worker

// NewWebhookClientResolving is NewWebhookClient looking names up with the
// resolver given, for tests that must not query DNS.
var NewWebhookClientResolving = newWebhookClient
