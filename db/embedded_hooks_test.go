package db

// Crash makes this process forget the server it owns without stopping it,
// as a crash (kill -9) would: the owner's lock is released and the server
// keeps running.
func (e *Embedded) Crash() { e.release() }
