package controller

import (
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
