package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/coredns/coredns/core/dnsserver"

	"github.com/servicegroup/servicegroup/internal/testbin"
)

func TestDirectiveOrder(t *testing.T) {
	i := slices.Index(dnsserver.Directives, "gridhosts")
	if i < 0 || i+1 >= len(dnsserver.Directives) || dnsserver.Directives[i+1] != "kubernetes" {
		t.Fatalf("gridhosts not just before kubernetes: %v", dnsserver.Directives)
	}
	if n := len(slices.DeleteFunc(slices.Clone(dnsserver.Directives), func(s string) bool { return s != "gridhosts" })); n != 1 {
		t.Fatalf("gridhosts listed %d times", n)
	}
}

func TestInsertBefore(t *testing.T) {
	got, err := insertBefore([]string{"a", "b", "c"}, "x", "b")
	if err != nil || !slices.Equal(got, []string{"a", "x", "b", "c"}) {
		t.Fatalf("got %v, %v", got, err)
	}
	if _, err := insertBefore([]string{"a"}, "x", "b"); err == nil {
		t.Fatal("missing anchor accepted")
	}
	if _, err := insertBefore([]string{"x", "b"}, "x", "b"); err == nil {
		t.Fatal("duplicate accepted")
	}
}

// TestBuiltBinaryListsGridhosts checks the built command's own plugin list,
// as an operator would with `coredns -plugins`.
func TestBuiltBinaryListsGridhosts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds CoreDNS")
	}
	defer testbin.Cleanup()
	bin := testbin.Path(t, "coredns")
	out, err := exec.CommandContext(t.Context(), bin, "-plugins").Output()
	if err != nil {
		t.Fatal(err)
	}
	plugins := strings.Fields(string(out))
	for _, want := range []string{"gridhosts", "kubernetes", "hosts", "cache", "ready"} {
		if !slices.Contains(plugins, want) {
			t.Errorf("coredns -plugins lacks %q:\n%s", want, out)
		}
	}
}
