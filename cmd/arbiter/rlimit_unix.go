//go:build unix

package main

import "syscall"

// raiseOpenFileLimit raises the process's soft limit on open files to its
// hard limit, so the connection cap, not the file limit, is what bounds
// connections, and returns the limit in force. Go itself raises it at start
// on most systems; this makes sure, and reports it.
func raiseOpenFileLimit() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur >= lim.Max {
		return uint64(lim.Cur), nil // int64 on FreeBSD, uint64 elsewhere
	}
	raised := lim
	raised.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
		return uint64(lim.Cur), err
	}
	return uint64(raised.Cur), nil
}
