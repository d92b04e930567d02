package gridcli

import (
	"strings"
	"testing"

	"github.com/servicegroup/servicegroup/internal/testbin"
)

// TestCorefileRestrictKeys: explain reads require_node_restricted_keys from
// a Corefile's gridhosts blocks: the shipped Corefile.node does not set it;
// the option line inside the block does; the word as another option's
// argument, or in another plugin's block, does not; a Corefile without
// gridhosts, or whose blocks disagree, cannot tell.
func TestCorefileRestrictKeys(t *testing.T) {
	shipped, err := testbin.ReadRepoFile("corefile", "Corefile.node")
	if err != nil {
		t.Fatal(err)
	}
	withOption := strings.Replace(string(shipped), "    gridhosts cluster.local {\n", "    gridhosts cluster.local {\n        require_node_restricted_keys\n", 1)
	if withOption == string(shipped) {
		t.Fatal("no gridhosts block in the shipped Corefile.node")
	}
	for _, tc := range []struct {
		name, text string
		want       bool
		err        string
	}{
		{"shipped Corefile.node", string(shipped), false, ""},
		{"with the option", withOption, true, ""},
		{"an argument", ".:53 {\n  gridhosts cluster.local {\n    kubeconfig require_node_restricted_keys\n  }\n}\n", false, ""},
		{"another plugin's block", ".:53 {\n  gridhosts\n  kubernetes cluster.local {\n    require_node_restricted_keys\n  }\n}\n", false, ""},
		{"two blocks, both set", ".:53 {\n  gridhosts a.local {\n    require_node_restricted_keys\n  }\n}\n.:54 {\n  gridhosts b.local {\n    require_node_restricted_keys\n  }\n}\n", true, ""},
		{"no gridhosts", ".:53 {\n  kubernetes cluster.local\n}\n", false, "the Corefile has no gridhosts block"},
		{"blocks disagree", ".:53 {\n  gridhosts a.local {\n    require_node_restricted_keys\n  }\n}\n.:54 {\n  gridhosts b.local\n}\n", false, "the Corefile's gridhosts blocks disagree on require_node_restricted_keys"},
		{"does not parse", ".:53 {\n  gridhosts {\n", false, "the Corefile does not parse"},
	} {
		got, err := corefileRestrictKeys(tc.text)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
		case got != tc.want:
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
