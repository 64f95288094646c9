package limits

// ProcessID is the name s's slots are held under, for tests that end a
// process's lease.
func (s *Shared) ProcessID() string { return s.process }

// BlockStatements counts the statements s's slots reserved in blocks made
// (reservations and give-backs).
func (s *Shared) BlockStatements() int64 { return s.blockStatements.Load() }
