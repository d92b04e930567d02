package wrapper

// SetResumeUnansweredWatches sets whether wrappers built from now on
// read an unanswered watch as a refused connection (BenchmarkReconnectStorm
// compares).
func SetResumeUnansweredWatches(on bool) { resumeUnansweredWatches = on }
