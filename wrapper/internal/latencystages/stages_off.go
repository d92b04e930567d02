//go:build !latencystages

package latencystages

// No-op stage stamps: see stages.go (-tags latencystages).

func Stamp(any, string) {}

func StampSeq(string, string) {}

func Report([]string) string { return "" }

func Reset() {}
