// Command chartgen writes the Helm chart build/chart from build/manifests
// (internal/chartgen). hack/update-codegen.sh runs it; hack/verify-codegen.sh
// checks its output is current.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/servicegroup/servicegroup/internal/chartgen"
)

func main() {
	root := flag.String("root", ".", "repository root")
	flag.Parse()
	files, err := chartgen.Generate(*root)
	if err == nil {
		err = chartgen.Write(*root, files)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chartgen:", err)
		os.Exit(1)
	}
}
