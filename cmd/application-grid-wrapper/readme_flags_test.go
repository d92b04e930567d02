package main

import (
	"path/filepath"
	"testing"

	"github.com/servicegroup/servicegroup/internal/flagtable"
	"github.com/servicegroup/servicegroup/internal/testbin"
)

// TestREADMEFlagTable: wrapper/README.md's flag table names every flag the
// wrapper registers, each with the default it has, and no other.
func TestREADMEFlagTable(t *testing.T) {
	flagtable.Check(t, testbin.Path(t, "application-grid-wrapper"), filepath.Join("..", "..", "wrapper", "README.md"), "NODE_NAME=")
}
