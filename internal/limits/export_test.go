package limits

// ProcessID is the name s's slots are held under, for tests that end a
// process's lease.
func (s *Shared) ProcessID() string { return s.process }
