package slack

// ReconnectDelay exposes reconnectDelay to the tests.
var ReconnectDelay = reconnectDelay
