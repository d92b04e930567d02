package wrapper

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
	"k8s.io/klog/v2"
)

// minWatchTimeout is the apiserver's default --min-request-timeout: watches
// without timeoutSeconds last between one and two times it.
const minWatchTimeout = 30 * time.Minute

// watchOptions maps the request's options to where the watch starts, as the
// apiserver does (watch-list needs resourceVersionMatch=NotOlderThan and
// bookmarks).
func watchOptions(opts *metainternalversion.ListOptions) (WatchOptions, error) {
	rv, err := parseRV(opts.ResourceVersion)
	if err != nil {
		return WatchOptions{}, err
	}
	wo := WatchOptions{RV: rv, Bookmarks: opts.AllowWatchBookmarks}
	switch {
	case opts.SendInitialEvents != nil && *opts.SendInitialEvents:
		if opts.ResourceVersionMatch != metav1.ResourceVersionMatchNotOlderThan {
			return wo, apierrors.NewBadRequest("sendInitialEvents is forbidden for watch unless resourceVersionMatch is set to NotOlderThan")
		}
		if !opts.AllowWatchBookmarks {
			return wo, apierrors.NewBadRequest("sendInitialEvents requires setting allowWatchBookmarks to true")
		}
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

// serveWatch streams events like the apiserver's WatchServer: the negotiated
// stream serializer and framer, each object encoded into a WatchEvent,
// flushed whenever no further event is pending.
func (s *Server) serveWatch(w http.ResponseWriter, req *http.Request, r *servedResource, opts *metainternalversion.ListOptions, pred Predicate) {
	logger := klog.FromContext(req.Context())
	wo, err := watchOptions(opts)
	if err != nil {
		s.writeError(w, req, r, err)
		return
	}
	info, err := negotiation.NegotiateOutputMediaTypeStream(req, s.codecs, negotiation.DefaultEndpointRestrictions)
	if err != nil {
		s.writeError(w, req, r, err)
		return
	}
	framer := info.StreamSerializer.Framer
	if framer == nil {
		s.writeError(w, req, r, apierrors.NewBadRequest(fmt.Sprintf("no framer for %q", info.MediaType)))
		return
	}
	encoder := s.codecs.EncoderForVersion(info.StreamSerializer.Serializer, r.gv)
	embedded := s.codecs.EncoderForVersion(info.Serializer, r.gv)
	mediaType := info.MediaType
	if mediaType != runtime.ContentTypeJSON {
		mediaType += ";stream=watch"
	}

	timeout := time.Duration(float64(minWatchTimeout) * (1 + rand.Float64()))
	if opts.TimeoutSeconds != nil {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}

	// A watcher that falls behind is cut off by the store; its write may be
	// blocked on a client that stopped reading, so expire the write deadline.
	rc := http.NewResponseController(w)
	var doneMu sync.Mutex
	done := false
	wo.Pred = pred
	wo.OnCutoff = func() {
		doneMu.Lock()
		defer doneMu.Unlock()
		if !done {
			_ = rc.SetWriteDeadline(time.Now())
		}
	}
	defer func() {
		doneMu.Lock()
		done = true
		doneMu.Unlock()
	}()

	initial, watcher, err := r.store.Watch(wo)
	var rvErr *rvError
	if errors.As(err, &rvErr) && !rvErr.tooOld {
		s.writeError(w, req, r, tooLargeError(rvErr.rv, rvErr.bound))
		return
	}

	w.Header().Set("Content-Type", mediaType)
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()

	enc := streaming.NewEncoder(framer.NewFrameWriter(w), encoder)
	var buf bytes.Buffer
	send := func(typ watch.EventType, obj runtime.Object) error {
		buf.Reset()
		if err := embedded.Encode(shallowCopy(obj), &buf); err != nil {
			return err
		}
		if err := enc.Encode(&metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: buf.Bytes()}}); err != nil {
			return err
		}
		eventsSent.WithLabelValues(r.name, string(typ)).Inc()
		return nil
	}

	if rvErr != nil {
		// As the apiserver's watch cache: an ERROR event, the client relists.
		status := apierrors.NewResourceExpired(rvErr.Error()).Status()
		_ = send(watch.Error, &status)
		_ = rc.Flush()
		return
	}
	defer r.store.StopWatch(watcher)

	for _, ev := range initial {
		if err := send(ev.Type, ev.Object); err != nil {
			logger.V(4).Info("Watch ended", "resource", r.name, "err", err)
			return
		}
	}
	_ = rc.Flush()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	events := watcher.Events()
	for {
		select {
		case <-req.Context().Done():
			return
		case <-timer.C:
			return
		case ev, ok := <-events:
			if !ok {
				logger.V(2).Info("Watcher closed: it fell behind or was stopped", "resource", r.name)
				return
			}
			if err := send(ev.Type, ev.Object); err != nil {
				logger.V(4).Info("Watch ended", "resource", r.name, "err", err)
				return
			}
			if len(events) == 0 {
				if err := rc.Flush(); err != nil {
					return
				}
			}
		}
	}
}
