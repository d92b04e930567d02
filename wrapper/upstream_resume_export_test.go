package wrapper

// SetResumeWatchesOnDialErrors sets whether wrappers built from now on
// map dial errors to refused connections (BenchmarkReconnectStorm compares).
func SetResumeWatchesOnDialErrors(on bool) { resumeWatchesOnDialErrors = on }
