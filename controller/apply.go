package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FieldManager owns every field the controller applies.
const FieldManager = "application-grid-controller"

// AnnotationAppliedHash records, on every child, the hash of the apply
// configuration last applied to it. Server-side apply cannot tell us cheaply
// whether a field was dropped from the template (defaults filled in by the
// apiserver inside atomic fields make the extracted configuration differ from
// ours forever), so the hash covers removals and the extracted configuration
// covers drift made by other writers.
const AnnotationAppliedHash = "superedge.io/applied-hash"

// hashOf is a short, stable digest of an apply configuration.
func hashOf(cfg any) (string, error) {
	data, err := json.Marshal(cfg)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:10]), nil
}

// fromTemplate converts a typed template (a spec from a grid) into its apply
// configuration type. Both share one JSON form; fields left at their zero
// value with omitempty do not appear, so the controller only claims what the
// template sets.
func fromTemplate(template, into any) error {
	data, err := json.Marshal(template)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, into)
}

// toJSONMap decodes v's JSON form into generic maps for comparison.
func toJSONMap(v any) (map[string]any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// upToDate reports whether applying want to live would change nothing we
// care about: live carries want's hash and everything in want is still owned
// by us with the same value (extracted is live's configuration extracted for
// our field manager).
func upToDate(live metav1.Object, want map[string]any, extracted any) (bool, error) {
	wantHash := nestedString(want, "metadata", "annotations", AnnotationAppliedHash)
	if wantHash == "" || live.GetAnnotations()[AnnotationAppliedHash] != wantHash {
		return false, nil
	}
	have, err := toJSONMap(extracted)
	if err != nil {
		return false, err
	}
	return contains(have, want), nil
}

func nestedString(m map[string]any, path ...string) string {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = mm[p]
	}
	s, _ := cur.(string)
	return s
}

// contains reports whether every value set in want is set to the same value
// in have. Lists must have the same length and match element by element.
// Quantities compare by value ("1000m" equals "1").
func contains(have, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return len(w) == 0 && have == nil
		}
		for k, wv := range w {
			hv, ok := h[k]
			if !ok {
				if m, isMap := wv.(map[string]any); isMap && len(m) == 0 {
					continue // an empty struct sets nothing
				}
				return false
			}
			if !contains(hv, wv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !contains(h[i], w[i]) {
				return false
			}
		}
		return true
	case string:
		h, ok := have.(string)
		if !ok {
			return false
		}
		return h == w || sameQuantity(h, w)
	default:
		return reflect.DeepEqual(have, want)
	}
}

// sameQuantity: a and b are quantities of one value ("1Gi" and "1024Mi").
func sameQuantity(a, b string) bool {
	qa, errA := resource.ParseQuantity(a)
	qb, errB := resource.ParseQuantity(b)
	return errA == nil && errB == nil && qa.Cmp(qb) == 0
}

// releasePatch removes owner's reference from a child, failing if the child
// was replaced meanwhile (UID precondition).
func releasePatch(owner, child metav1.Object) []byte {
	return fmt.Appendf(nil, `{"metadata":{"ownerReferences":[{"$patch":"delete","uid":%q}],"uid":%q}}`,
		owner.GetUID(), child.GetUID())
}
