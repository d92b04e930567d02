package wrapper

// StageStampSeq and StageReport let BenchmarkWatchLatency stamp its own
// stages and print the breakdown (only with -tags latencystages).
var (
	StageStampSeq = stageStampSeq
	StageReport   = stageReport
	StageReset    = stageReset
)
