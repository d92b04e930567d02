package gridcli

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/servicegroup/servicegroup/internal/testbin"
)

// TestOurWrapperRoles: every ClusterRole that build/manifests (every
// component: the default install, the site stream, monitoring) binds the
// wrapper's ServiceAccount to is one doctor takes for ours, so that none is
// reported as a foreign binding on a cluster installed as shipped.
func TestOurWrapperRoles(t *testing.T) {
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var bound []string
	err = filepath.WalkDir(filepath.Join(root, "build", "manifests"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, doc := range bytes.Split(data, []byte("\n---")) {
			var b rbacv1.ClusterRoleBinding
			if yaml.Unmarshal(doc, &b) != nil || b.Kind != "ClusterRoleBinding" {
				continue
			}
			for _, s := range b.Subjects {
				if s.Kind == "ServiceAccount" && s.Namespace == edgeNamespace && s.Name == wrapperServiceAccount {
					bound = append(bound, b.RoleRef.Name)
					if !slices.Contains(ourWrapperRoles, b.RoleRef.Name) {
						t.Errorf("%s: ClusterRoleBinding %s binds the wrapper to %s, which doctor reports as foreign", path, b.Name, b.RoleRef.Name)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The walk found the bindings (a parse that finds none would pass).
	for _, want := range []string{"servicegroup:application-grid-wrapper", "servicegroup:metrics-serving-requester"} {
		if !slices.Contains(bound, want) {
			t.Errorf("no ClusterRoleBinding of build/manifests binds the wrapper to %s (found %v)", want, bound)
		}
	}
}
