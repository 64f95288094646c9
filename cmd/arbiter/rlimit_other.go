//go:build !unix

package main

// raiseOpenFileLimit does nothing where there is no RLIMIT_NOFILE; 0 means
// the limit is unknown.
func raiseOpenFileLimit() (uint64, error) { return 0, nil }
