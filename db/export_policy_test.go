package db

// OnPolicyReads has started called when a read of an account's policies
// starts, and joined when a miss of the cache joins a read in flight,
// until the returned function restores them.
func OnPolicyReads(started, joined func(accountID string)) (restore func()) {
	prevStarts, prevJoined := policyReadStarts, policyReadJoined
	policyReadStarts, policyReadJoined = started, joined
	return func() { policyReadStarts, policyReadJoined = prevStarts, prevJoined }
}
