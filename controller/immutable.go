package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// immutableChange: the apiserver refused an update only because it would
// change fields that cannot change in place.
type immutableChange struct {
	fields []string
	// selector: the selector is among them; pods could not be re-adopted.
	selector bool
}

func (e immutableChange) Error() string {
	return fmt.Sprintf("field(s) %s cannot change in place", strings.Join(e.fields, ", "))
}

// asImmutableChange recognises an Invalid error all of whose causes are
// about updating immutable fields (field is immutable / forbidden updates);
// any other cause (an invalid template) means it is not one.
func asImmutableChange(err error) (immutableChange, bool) {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return immutableChange{}, false
	}
	var ic immutableChange
	for _, c := range status.Status().Details.Causes {
		immutable := strings.Contains(c.Message, "immutable") || strings.Contains(c.Message, "may not change once set") ||
			(c.Type == metav1.CauseType(field.ErrorTypeForbidden) && strings.Contains(c.Message, "updates to"))
		if !immutable {
			return immutableChange{}, false
		}
		ic.fields = append(ic.fields, c.Field)
		if strings.HasPrefix(c.Field, "spec.selector") {
			ic.selector = true
		}
	}
	return ic, len(ic.fields) > 0
}

// selectorChanged reports whether want (the child's apply configuration)
// selects other pods than live: kube-apiserver 1.36 and older refuse a
// StatefulSet selector change with a single cause on "spec" that names no
// field, so the causes alone would take it for a change the re-creation
// path handles, and the new StatefulSet could not adopt the old pods.
func selectorChanged(live, want any) bool {
	selectorOf := func(v any) (string, bool) {
		m, err := toJSONMap(v)
		if err != nil {
			return "", false
		}
		spec, _ := m["spec"].(map[string]any)
		raw, ok := spec["selector"]
		if !ok {
			return "", false
		}
		data, err := json.Marshal(raw)
		if err != nil {
			return "", false
		}
		var ls metav1.LabelSelector
		if err := json.Unmarshal(data, &ls); err != nil {
			return "", false
		}
		sel, err := metav1.LabelSelectorAsSelector(&ls)
		if err != nil {
			return "", false
		}
		return sel.String(), true
	}
	got, ok1 := selectorOf(live)
	wanted, ok2 := selectorOf(want)
	return ok1 && ok2 && got != wanted
}
