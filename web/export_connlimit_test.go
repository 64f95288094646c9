package web

// Counts returns the connections the limiter counts open, those idle in
// keep-alive, and those whose request waits for a task.
func (l *ConnLimiter) Counts() (open, idle, waiting int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range l.waiters {
		waiting += w.Len()
	}
	return l.open, l.idle.Len(), waiting
}
