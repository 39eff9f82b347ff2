package exec

import "time"

// Hooks are told what an Executor does, for metrics and the audit log.
// They are called on the executor's own paths, so they must return
// quickly and must not call back into the executor; a nil hook is
// skipped. They may be called from many goroutines at once.
type Hooks struct {
	// SandboxCreated is told that a sandbox of language was created,
	// for a run, a ready pool or a session, in d; err is why it could
	// not be.
	SandboxCreated func(language string, d time.Duration, err error)
	// PoolTake is told whether a one-shot run of a language with a pool
	// found a ready sandbox (hit) or had to create its own.
	PoolTake func(language string, hit bool)
	// QueueWait is told how long a one-shot run or a cell waited for one
	// of the Concurrency slots.
	QueueWait func(language string, d time.Duration)
	// SessionEnded is told that a session ended, and why (the text a
	// later call of its owner is told). info is the session as it ended.
	SessionEnded func(info SessionInfo, why string)
}

// PoolSizes returns, per language, how many ready sandboxes wait now.
func (e *Executor) PoolSizes() map[string]int {
	sizes := make(map[string]int, len(e.langs))
	for name, l := range e.langs {
		sizes[name] = l.Count()
	}
	return sizes
}

// SessionCount returns how many sessions are open now, whoever owns them.
func (e *Executor) SessionCount() int {
	return e.sessions.Count()
}
