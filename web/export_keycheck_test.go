package web

// KeyRefreshEvery is how often Run renews the entries of the keys in use.
const KeyRefreshEvery = keyRefreshEvery

// CachedKeys is the number of entries the checker caches.
func (c *KeyChecker) CachedKeys() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.cache)
}

// SetMaxCachedKeys sets the cache's bound; call it before the first check.
func (c *KeyChecker) SetMaxCachedKeys(n int) { c.maxKeys = n }

// OnJoinedLookup has joined called when a check joins a lookup of its key
// in flight; call it before the first check.
func (c *KeyChecker) OnJoinedLookup(joined func()) {
	c.lookups.Joined = func(string) { joined() }
}
