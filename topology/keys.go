package topology

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// AnyKey matches every endpoint; allowed only as the last topology key.
const AnyKey = "*"

// MaxTopologyKeys bounds the annotation, as upstream's topologyKeys field did.
const MaxTopologyKeys = 16

// ParseKeys parses the value of the topologyKeys annotation: a JSON
// list of node label keys tried in order, optionally ending with "*".
func ParseKeys(value string) ([]string, error) {
	var keys []string
	if err := json.Unmarshal([]byte(value), &keys); err != nil {
		return nil, fmt.Errorf("topologyKeys %q is not a JSON list of strings: %w", value, err)
	}
	if len(keys) == 0 {
		return nil, errors.New("topologyKeys is empty")
	}
	if len(keys) > MaxTopologyKeys {
		return nil, fmt.Errorf("topologyKeys has %d keys, at most %d are allowed", len(keys), MaxTopologyKeys)
	}
	seen := make(map[string]bool, len(keys))
	for i, k := range keys {
		if seen[k] {
			return nil, fmt.Errorf("topologyKeys: duplicate key %q", k)
		}
		seen[k] = true
		if k == AnyKey {
			if i != len(keys)-1 {
				return nil, errors.New(`topologyKeys: "*" must be the last key`)
			}
			continue
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, fmt.Errorf("topologyKeys: invalid label key %q: %s", k, strings.Join(errs, "; "))
		}
	}
	return keys, nil
}
