package requestcheck

import (
	"fmt"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validate/content"
)

// PathError refuses a path whose segments may mean something else upstream
// than what was checked here: the proxy passes the path on as the client
// encoded it, so a percent-encoded dot segment (/apis/%2e%2e/api), an
// encoded slash or a doubly encoded character would be resolved only by the
// apiserver, after the checks. Each segment, decoded, must be a valid path
// segment name by apimachinery's rule (not "." or "..", no "/" or "%"),
// and none may be empty.
func PathError(u *url.URL) error {
	p := strings.TrimSuffix(strings.TrimPrefix(u.EscapedPath(), "/"), "/")
	if p == "" {
		return nil
	}
	for _, raw := range strings.Split(p, "/") {
		seg, err := url.PathUnescape(raw)
		if err != nil {
			return apierrors.NewBadRequest(fmt.Sprintf("invalid path %q: %v", u.EscapedPath(), err))
		}
		if seg == "" {
			return apierrors.NewBadRequest(fmt.Sprintf("invalid path %q: empty segment", u.EscapedPath()))
		}
		if msgs := content.IsPathSegmentName(seg); len(msgs) > 0 {
			return apierrors.NewBadRequest(fmt.Sprintf("invalid path %q: segment %q %s", u.EscapedPath(), seg, strings.Join(msgs, ", ")))
		}
	}
	return nil
}
