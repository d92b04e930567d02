package v1

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// AnnotationGridUniqKey carries the grid's gridUniqKey verbatim on every
// produced object. The label LabelGridUniqKey cannot hold a prefixed key
// (label values have no "/"), so readers take the key from this annotation
// when it is present and from the label otherwise (objects made by SuperEdge,
// whose keys are never prefixed).
const AnnotationGridUniqKey = "superedge.io/grid-uniq-key"

// GridUniqKeyLabelValue is the value of the LabelGridUniqKey label for a grid
// key. A key that is a valid label value (every key SuperEdge accepts: an
// unprefixed name of at most 63 characters) is kept byte for byte, so
// children made by SuperEdge and by servicegroup carry the same labels. A
// prefixed key has its "/" replaced by "_" (a DNS prefix never contains "_");
// a result longer than a label value may be keeps its first 54 characters and
// ends with "-" and 8 hex digits of the key's SHA-256. The mapping is
// deterministic, so the value can be compared and used in selectors; it is
// never decoded: the key itself is in AnnotationGridUniqKey.
func GridUniqKeyLabelValue(key string) string {
	if len(validation.IsValidLabelValue(key)) == 0 {
		return key
	}
	v := strings.ReplaceAll(key, "/", "_")
	if len(v) <= validation.LabelValueMaxLength && len(validation.IsValidLabelValue(v)) == 0 {
		return v
	}
	sum := sha256.Sum256([]byte(key))
	head := v[:min(len(v), 54)]
	head = strings.TrimRight(head, "-_.")
	return head + "-" + hex.EncodeToString(sum[:4])
}

// GridUniqKeyOf returns the grid key an object produced for a grid carries:
// the AnnotationGridUniqKey annotation if set, else the LabelGridUniqKey
// label. ok is false when the object carries neither.
func GridUniqKeyOf(labels, annotations map[string]string) (key string, ok bool) {
	if k, ok := annotations[AnnotationGridUniqKey]; ok && k != "" {
		return k, true
	}
	k, ok := labels[LabelGridUniqKey]
	return k, ok
}
