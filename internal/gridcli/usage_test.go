package gridcli

import (
	"bytes"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// TestUsageErrors: bad flags and arguments are refused with their message
// before any client is built (the kubeconfig does not exist: reading it
// would be another error).
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "dg/web", "-o", "xml"}, `--output must be table, json or yaml, not "xml"`},
		{[]string{"status", "web"}, `want dg/NAME, ssg/NAME or sg/NAME, got "web"`},
		{[]string{"status", "pod/web"}, `want dg/NAME, ssg/NAME or sg/NAME, got "pod/web"`},
		{[]string{"explain", "svc/web"}, `--node is required`},
		{[]string{"explain", "dns", "--node", "n"}, `usage: kubectl grid explain dns NAME --node NODE`},
		{[]string{"explain", "pod/web", "--node", "n"}, `unknown kind "pod": want svc/NAME or dns NAME`},
		{[]string{"explain", "svc/", "--node", "n"}, `want svc/NAME or dns NAME, got "svc/"`},
		{[]string{"rollout", "status", "sg/web"}, `want dg/NAME or ssg/NAME, got "sg/web"`},
		{[]string{"rollout", "status", "dg/web", "--timeout=-1s"}, `--timeout must not be negative, got -1s`},
		{[]string{"rollout", "pause", "ssg/"}, `want dg/NAME or ssg/NAME, got "ssg/"`},
		{[]string{"rollout", "undo", "web"}, `want dg/NAME or ssg/NAME, got "web"`},
	} {
		var out bytes.Buffer
		cmd := NewCommand(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &out})
		cmd.SetArgs(append(tc.args, "--kubeconfig", "/nonexistent/kubeconfig"))
		err := cmd.Execute()
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: error %v, want %q", tc.args, err, tc.want)
		}
	}
}
