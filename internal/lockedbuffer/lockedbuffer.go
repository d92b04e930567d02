// Package lockedbuffer holds the output of a process or stream that is
// still being written while it is read (exec's copy goroutines, a child
// process's stdout).
package lockedbuffer

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for writers and readers at once.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
