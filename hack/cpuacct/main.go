// Command cpuacct accounts for CI's CPU time (internal/cpuacct).
//
//	cpuacct exec --records FILE CMD [ARG...]
//
// runs CMD (go test -exec gives it the test binary and its flags) and
// appends its user+sys CPU time, with that of every process it started, to
// FILE under the import path of the package in the working directory.
//
//	cpuacct report --records FILE [--events FILE] [--whole] [--components FILE] [--top N]
//
// prints the slowest packages with their CPU-minutes and the totals;
// --events is go test -json's output; --whole adds the whole run, the CPU
// time of the calling script and of everything it waited for; --components
// adds the real components the tests started (etcd, kube-apiserver, ...),
// by program and by package, from the records test/controlplane appends.
//
//	cpuacct speed
//
// does a fixed piece of work and prints the CPU milliseconds it took
// (cpuacct.MeasureSpeed): how much a core of this machine does.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/servicegroup/servicegroup/internal/cpuacct"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "exec":
		var code int
		if code, err = execCmd(os.Args[2:]); err == nil {
			os.Exit(code)
		}
	case "report":
		err = reportCmd(os.Args[2:])
	case "speed":
		var d time.Duration
		if d, err = cpuacct.MeasureSpeed(); err == nil {
			fmt.Println(d.Milliseconds())
		}
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cpuacct:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: cpuacct exec --records FILE CMD [ARG...] | cpuacct report --records FILE [--events FILE] [--whole] [--components FILE] [--top N] | cpuacct speed")
	os.Exit(2)
}

// execCmd runs the command and records it; it returns the command's exit
// code.
func execCmd(args []string) (int, error) {
	fs := flag.NewFlagSet("cpuacct exec", flag.ExitOnError)
	records := fs.String("records", "", "the records file to append to")
	pkg := fs.String("package", "", "the name to record (default: the import path of the working directory's package)")
	_ = fs.Parse(args)
	if *records == "" || fs.NArg() == 0 {
		return 0, fmt.Errorf("exec needs --records and a command")
	}
	dir, err := os.Getwd()
	if err != nil {
		return 0, err
	}
	if *pkg == "" {
		if *pkg, err = cpuacct.PackageOf(dir); err != nil {
			return 0, err
		}
	}
	// The test harnesses' component records (cpuacct.RecordComponent)
	// name the package by this.
	u, code, err := cpuacct.Run(fs.Args(), dir, append(os.Environ(), cpuacct.PackageEnv+"="+*pkg))
	if err != nil {
		return 0, err
	}
	if err := cpuacct.Append(*records, cpuacct.NewRecord(*pkg, u, code)); err != nil {
		// The command's own result stands; a lost record is said, and
		// fails the run when nothing else did.
		fmt.Fprintf(os.Stderr, "cpuacct: recording %s: %v\n", *pkg, err)
		if code == 0 {
			code = 1
		}
	}
	return code, nil
}

func reportCmd(args []string) error {
	fs := flag.NewFlagSet("cpuacct report", flag.ExitOnError)
	records := fs.String("records", "", "the records file cpuacct exec appended to")
	events := fs.String("events", "", "go test -json's output of the same run")
	whole := fs.Bool("whole", false, "add the whole run: the calling script's CPU time and that of everything it waited for")
	top := fs.Int("top", 12, "how many packages to list")
	components := fs.String("components", "", "the components file the test harnesses appended to (cpuacct.ComponentsEnv)")
	_ = fs.Parse(args)
	if *records == "" || fs.NArg() != 0 {
		return fmt.Errorf("report needs --records and no arguments")
	}
	recs, err := cpuacct.ReadRecords(*records)
	if err != nil {
		return err
	}
	var w *cpuacct.Usage
	if *whole {
		u, err := cpuacct.ProcessUsage(os.Getppid())
		if err != nil {
			return err
		}
		w = &u
	}
	var s cpuacct.Summary
	if *events != "" {
		f, err := os.Open(*events)
		if err != nil {
			return err
		}
		defer f.Close()
		s, err = cpuacct.Summarize(recs, f, w)
		if err != nil {
			return err
		}
	} else if s, err = cpuacct.Summarize(recs, nil, w); err != nil {
		return err
	}
	if err := s.Write(os.Stdout, *top); err != nil || *components == "" {
		return err
	}
	cs, err := cpuacct.ReadComponents(*components)
	if err != nil {
		return err
	}
	fmt.Println()
	return cpuacct.WriteComponents(os.Stdout, cs, *top)
}
