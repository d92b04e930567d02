// Command hello is the program of the image builder's test fixtures, in
// place of the shipped ones: it cross-compiles in a second for every
// platform, and like them prints the version stamped into internal/version
// for --version.
package main

import (
	"fmt"
	"os"
	"runtime"

	"github.com/servicegroup/servicegroup/internal/version"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "--version" {
		fmt.Println(version.Version)
		return
	}
	fmt.Println("hello from", runtime.GOOS+"/"+runtime.GOARCH)
}
