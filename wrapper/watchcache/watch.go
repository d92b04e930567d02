package watchcache

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
	"k8s.io/klog/v2"
)

// minWatchTimeout is the apiserver's default --min-request-timeout: watches
// without timeoutSeconds last between one and two times it.
const minWatchTimeout = 30 * time.Minute

// watchOptions maps the request's options (already checked by
// ValidateListOptions) to where the watch starts, as the apiserver does.
func watchOptions(opts *metainternalversion.ListOptions) (WatchOptions, error) {
	rv, err := parseRV(opts.ResourceVersion)
	if err != nil {
		return WatchOptions{}, err
	}
	wo := WatchOptions{RV: rv, Bookmarks: opts.AllowWatchBookmarks}
	switch {
	case opts.SendInitialEvents != nil && *opts.SendInitialEvents:
		wo.Mode, wo.InitialEventsEnd = FromState, true
	case opts.SendInitialEvents != nil:
		if opts.ResourceVersion == "" || opts.ResourceVersion == "0" {
			wo.Mode = FromNow
		} else {
			wo.Mode = FromVersion
		}
	case opts.ResourceVersion == "" || opts.ResourceVersion == "0":
		wo.Mode, wo.RV = FromState, 0
	default:
		wo.Mode = FromVersion
	}
	return wo, nil
}

// serveWatch answers a watch request: it negotiates the stream encoding,
// registers a watcher in the store and hands both to a watchServer, as the
// apiserver's watch handler hands a cache watcher to its WatchServer.
func (v *View) serveWatch(w http.ResponseWriter, req *http.Request, r *Served, opts *metainternalversion.ListOptions, pred Predicate) {
	wo, err := watchOptions(opts)
	if err != nil {
		writeError(w, req, r, err)
		return
	}
	info, err := negotiation.NegotiateOutputMediaTypeStream(req, codecs, negotiation.DefaultEndpointRestrictions)
	if err != nil {
		writeError(w, req, r, err)
		return
	}
	framer := info.StreamSerializer.Framer
	if framer == nil {
		writeError(w, req, r, apierrors.NewBadRequest(fmt.Sprintf("no framer for %q", info.MediaType)))
		return
	}
	mediaType := info.MediaType
	if mediaType != runtime.ContentTypeJSON {
		mediaType += ";stream=watch"
	}

	// timeoutSeconds=0 means the server default, as in the apiserver.
	timeout := time.Duration(float64(minWatchTimeout) * (1 + rand.Float64()))
	if opts.TimeoutSeconds != nil && *opts.TimeoutSeconds > 0 {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	wo.Pred = pred
	initial, watcher, err := r.Store.Watch(wo)
	var rvErr *VersionError
	if errors.As(err, &rvErr) && !rvErr.TooOld {
		writeError(w, req, r, TooLargeError(rvErr.RV, rvErr.Bound))
		return
	}
	if watcher != nil {
		defer r.Store.StopWatch(watcher)
	}

	ctx, cancel := context.WithTimeout(req.Context(), timeout)
	defer cancel()
	ws := &watchServer{
		ctx:          ctx,
		logger:       klog.FromContext(req.Context()),
		resource:     r,
		watcher:      watcher,
		writeTimeout: v.cfg.WatchWriteTimeout,
		w:            w,
		rc:           http.NewResponseController(w),
		encoder:      codecs.EncoderForVersion(info.StreamSerializer.Serializer, r.GroupVersion),
		embedded:     codecs.EncoderForVersion(info.Serializer, r.GroupVersion),
		framer:       framer,
	}
	ws.serve(mediaType, initial, rvErr)
}
