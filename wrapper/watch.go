package wrapper

import (
	"bytes"
	"context"
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

// watchBatch is how many events a watch takes from the log and writes under
// one write deadline.
const watchBatch = 256

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

	// timeoutSeconds=0 means the server default, as in the apiserver.
	timeout := time.Duration(float64(minWatchTimeout) * (1 + rand.Float64()))
	if opts.TimeoutSeconds != nil && *opts.TimeoutSeconds > 0 {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	wo.Pred = pred
	initial, watcher, err := r.store.Watch(wo)
	var rvErr *rvError
	if errors.As(err, &rvErr) && !rvErr.tooOld {
		s.writeError(w, req, r, tooLargeError(rvErr.rv, rvErr.bound))
		return
	}
	if watcher != nil {
		defer r.store.StopWatch(watcher)
	}

	// Every batch of writes gets a deadline, so a client that stops reading
	// is cut off after WatchWriteTimeout whatever the socket buffers hold;
	// the end of the watch (timeout, client gone) expires the deadline so
	// that even a blocked write returns.
	ctx, cancel := context.WithTimeout(req.Context(), timeout)
	defer cancel()
	rc := http.NewResponseController(w)
	var deadlineMu sync.Mutex
	finished := false
	var armed time.Time
	arm := func() error {
		deadlineMu.Lock()
		defer deadlineMu.Unlock()
		if err := ctx.Err(); err != nil {
			return err
		}
		armed = time.Now().Add(s.opts.WatchWriteTimeout)
		return rc.SetWriteDeadline(armed)
	}
	// disarm clears the deadline once a batch is out: over HTTP/2 a
	// deadline resets the stream when it passes even with no write pending,
	// which would cut off every watcher that is merely idle.
	disarm := func() {
		deadlineMu.Lock()
		defer deadlineMu.Unlock()
		if finished || ctx.Err() != nil {
			return
		}
		armed = time.Time{}
		_ = rc.SetWriteDeadline(time.Time{})
	}
	stopExpiring := context.AfterFunc(ctx, func() {
		deadlineMu.Lock()
		defer deadlineMu.Unlock()
		// Only a write in progress needs ending: over HTTP/2 an expired
		// deadline resets the stream (the client sees INTERNAL_ERROR, not
		// the end of the watch), so an idle watch ends by returning.
		if !finished && !armed.IsZero() {
			_ = rc.SetWriteDeadline(time.Now())
		}
	})
	defer func() {
		stopExpiring()
		deadlineMu.Lock()
		defer deadlineMu.Unlock()
		finished = true
		// A keep-alive connection must not carry this watch's deadline on.
		_ = rc.SetWriteDeadline(time.Time{})
	}()

	w.Header().Set("Content-Type", mediaType)
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	if err := arm(); err != nil {
		return
	}
	_ = rc.Flush()
	disarm()

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
	// sendAll writes events in batches, each under a fresh deadline, and
	// flushes after each batch.
	sendAll := func(events []Event) error {
		for len(events) > 0 {
			batch := events[:min(len(events), watchBatch)]
			events = events[len(batch):]
			if err := arm(); err != nil {
				return err
			}
			for _, ev := range batch {
				if err := send(ev.Type, ev.Object); err != nil {
					return err
				}
			}
			if err := rc.Flush(); err != nil {
				return err
			}
			disarm()
		}
		return nil
	}
	ended := func(err error) {
		// net/http cancels the request on a failed write, so tell a stalled
		// client from an ended watch by the deadline: a write that failed
		// after its own deadline was blocked that long (an ended watch
		// expires the deadline at once, before it).
		deadlineMu.Lock()
		stalled := err != nil && !armed.IsZero() && !time.Now().Before(armed)
		deadlineMu.Unlock()
		if stalled {
			watchersCutOff.WithLabelValues(r.name, cutOffStalled).Inc()
			logger.V(2).Info("Watcher cut off: it stopped reading", "resource", r.name, "writeTimeout", s.opts.WatchWriteTimeout)
			return
		}
		logger.V(4).Info("Watch ended", "resource", r.name, "err", err)
	}
	expired := func(rvErr *rvError) {
		// As the apiserver's watch cache: an ERROR event, the client relists.
		status := apierrors.NewResourceExpired(rvErr.Error()).Status()
		if err := arm(); err == nil && send(watch.Error, &status) == nil {
			_ = rc.Flush()
		}
	}

	if rvErr != nil {
		expired(rvErr)
		return
	}
	if err := sendAll(initial); err != nil {
		ended(err)
		return
	}
	var events []Event
	for {
		var wait <-chan struct{}
		events, wait, err = r.store.Next(watcher, events[:0], watchBatch)
		if errors.As(err, &rvErr) {
			watchersCutOff.WithLabelValues(r.name, cutOffBehind).Inc()
			logger.V(2).Info("Watcher cut off: it fell behind the event log", "resource", r.name)
			expired(rvErr)
			return
		}
		if len(events) == 0 {
			if wait == nil {
				continue // events were read, none selected by this watch
			}
			select {
			case <-ctx.Done():
				return
			case <-wait:
			}
			continue
		}
		if err := sendAll(events); err != nil {
			ended(err)
			return
		}
	}
}
