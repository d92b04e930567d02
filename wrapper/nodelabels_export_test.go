package wrapper

// SetSummariesRelistByMetadata sets whether wrappers built from now on
// relist the NodeLabelSummaries by their metadata first
// (BenchmarkReconnectStorm compares).
func SetSummariesRelistByMetadata(on bool) { summariesRelistByMetadata = on }
