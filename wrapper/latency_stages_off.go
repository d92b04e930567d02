//go:build !latencystages

package wrapper

// No-op stage stamps: see latency_stages.go (-tags latencystages).

func stageStamp(any, string) {}

func stageStampSeq(string, string) {}

func stageReport([]string) string { return "" }

func stageReset() {}
