package crds

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Fingerprint is a short hash of a CRD's spec, equal for an embedded
// manifest and the apiserver's copy of it: what the controller publishes
// as the schema it was built with, and what `kubectl grid doctor`
// recomputes from the cluster's CRDs. 32 hex digits, short enough for a
// label value.
func Fingerprint(spec *apiextensionsv1.CustomResourceDefinitionSpec) (string, error) {
	s := spec.DeepCopy()
	// The apiserver defaults an absent conversion to strategy None.
	if c := s.Conversion; c != nil && c.Strategy == apiextensionsv1.NoneConverter && c.Webhook == nil {
		s.Conversion = nil
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	// Through a generic value, empty lists and maps dropped: a manifest's
	// `required: []` and the apiserver's absent field are the same schema.
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	canonical, err := json.Marshal(pruneEmpty(v)) // map keys sorted
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:16]), nil
}

func pruneEmpty(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			e = pruneEmpty(e)
			if isEmpty(e) {
				delete(t, k)
				continue
			}
			t[k] = e
		}
	case []any:
		for i, e := range t {
			t[i] = pruneEmpty(e)
		}
	}
	return v
}

func isEmpty(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	}
	return false
}

// Fingerprints are the embedded CRDs' fingerprints by CRD name.
func Fingerprints() (map[string]string, error) {
	ms, err := parsed()
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(ms))
	for _, m := range ms {
		fp, err := Fingerprint(&m.CRD.Spec)
		if err != nil {
			return nil, err
		}
		out[m.Name] = fp
	}
	return out, nil
}
