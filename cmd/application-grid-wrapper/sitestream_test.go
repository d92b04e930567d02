package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The site stream's flags go together; a bad combination is a clear error
// before anything starts.
func TestSiteStreamFlags(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"application-grid-wrapper", "--kubeconfig", "/nonexistent", "--node-name", "n", "--insecure-plain-http"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--site-label", "example.com/site"}, "--site-label needs --peer-bind-address and --peer-token-file"},
		{[]string{"--site-label", "example.com/site", "--peer-bind-address", "0.0.0.0:51008", "--peer-token-file", tokenFile}, "must be the IP address peers dial"},
		{[]string{"--site-label", "example.com/site", "--peer-bind-address", "0.0.0.0:51008", "--peer-advertise-address", "shop-1:51008", "--peer-token-file", tokenFile}, "must be the IP address peers dial"},
		{[]string{"--site-label", "example.com/site", "--peer-bind-address", "nonsense", "--peer-token-file", tokenFile}, "--peer-advertise-address"},
	} {
		err := run(t.Context(), append(append([]string{}, base...), tc.args...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error with %q", tc.args, err, tc.want)
		}
	}
	tok := tokenFromFile(tokenFile)
	if got, err := tok(); err != nil || got != "tok" {
		t.Errorf("token: %q, %v", got, err)
	}
	if _, err := tokenFromFile(filepath.Join(t.TempDir(), "missing"))(); err == nil {
		t.Error("a missing token file gave no error")
	}
}
