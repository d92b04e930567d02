// Command hello is a tiny main the image builder's tests cross-compile for
// every platform cheaply.
package main

import (
	"fmt"
	"runtime"
)

func main() { fmt.Println("hello from", runtime.GOOS+"/"+runtime.GOARCH) }
