package testbin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPrebuilt(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvBin, dir)
	if err := os.WriteFile(filepath.Join(dir, "coredns"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kubectl-grid"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	paths, err := Paths(context.Background(), "coredns")
	if err != nil || paths["coredns"] != filepath.Join(dir, "coredns") {
		t.Fatalf("got %v, %v", paths, err)
	}
	for _, name := range []string{"application-grid-wrapper", "kubectl-grid"} {
		_, err := Paths(context.Background(), "coredns", name)
		if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), EnvBin) {
			t.Errorf("%s: want an error naming it and %s, got %v", name, EnvBin, err)
		}
	}
}

func TestUnknownCommand(t *testing.T) {
	t.Setenv(EnvBin, t.TempDir())
	if _, err := Paths(context.Background(), "kube-apiserver"); err == nil || !strings.Contains(err.Error(), "kube-apiserver") {
		t.Fatalf("want an error naming the unknown command, got %v", err)
	}
}
