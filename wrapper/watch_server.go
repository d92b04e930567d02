package wrapper

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
)

// watchServer streams one watcher's events to its client like the
// apiserver's WatchServer: the negotiated stream serializer and framer, each
// object encoded into a WatchEvent, a flush after every batch.
//
// Every batch of writes gets a deadline, so a client that stops reading is
// cut off after writeTimeout whatever the socket buffers hold; the end of the
// watch (timeout, client gone) expires the deadline so that even a blocked
// write returns.
type watchServer struct {
	ctx          context.Context // ends with the watch (timeout or client gone)
	logger       klog.Logger
	resource     *servedResource
	watcher      *Watcher // nil when the watch starts with 410 Expired
	writeTimeout time.Duration

	w        http.ResponseWriter
	rc       *http.ResponseController
	encoder  runtime.Encoder // the stream serializer: one WatchEvent per frame
	embedded runtime.Encoder // the object inside a WatchEvent
	framer   runtime.Framer
	stream   streaming.Encoder
	buf      bytes.Buffer // the embedded object, reused

	// deadlineMu guards the write deadline against the watch's end, which
	// expires it from another goroutine.
	deadlineMu sync.Mutex
	armed      time.Time // the deadline of the batch being written; zero: none
	finished   bool      // serve returned: the deadline is the connection's again
}

// serve writes the response header, then initial (or 410 Expired for a
// resourceVersion the store no longer has) and every event of the watcher
// until the watch ends.
func (ws *watchServer) serve(mediaType string, initial []Event, expired *rvError) {
	stopExpiring := context.AfterFunc(ws.ctx, ws.expireDeadline)
	defer func() {
		stopExpiring()
		ws.finish()
	}()

	ws.w.Header().Set("Content-Type", mediaType)
	ws.w.Header().Set("Transfer-Encoding", "chunked")
	ws.w.WriteHeader(http.StatusOK)
	if err := ws.armDeadline(); err != nil {
		return
	}
	_ = ws.rc.Flush()
	ws.disarmDeadline()
	ws.stream = streaming.NewEncoder(ws.framer.NewFrameWriter(ws.w), ws.encoder)

	if expired != nil {
		ws.sendExpired(expired)
		return
	}
	if err := ws.sendAll(initial); err != nil {
		ws.ended(err)
		return
	}
	ws.follow()
}

// follow sends the watcher's events as the store records them.
func (ws *watchServer) follow() {
	store := ws.resource.store
	var events []Event
	for {
		var (
			wait  <-chan struct{}
			err   error
			rvErr *rvError
		)
		events, wait, err = store.Next(ws.watcher, events[:0], watchBatch)
		if errors.As(err, &rvErr) {
			watchersCutOff.WithLabelValues(ws.resource.name, cutOffBehind).Inc()
			ws.logger.V(2).Info("Watcher cut off: it fell behind the event log", "resource", ws.resource.name)
			ws.sendExpired(rvErr)
			return
		}
		if len(events) == 0 {
			if wait == nil {
				continue // events were read, none selected by this watch
			}
			select {
			case <-ws.ctx.Done():
				return
			case <-wait:
			}
			continue
		}
		if err := ws.sendAll(events); err != nil {
			ws.ended(err)
			return
		}
	}
}

// sendAll writes events in batches, each under a fresh deadline, and
// flushes after each batch.
func (ws *watchServer) sendAll(events []Event) error {
	for len(events) > 0 {
		batch := events[:min(len(events), watchBatch)]
		events = events[len(batch):]
		if err := ws.armDeadline(); err != nil {
			return err
		}
		for _, ev := range batch {
			if err := ws.send(ev.Type, ev.Object); err != nil {
				return err
			}
		}
		if err := ws.rc.Flush(); err != nil {
			return err
		}
		ws.disarmDeadline()
	}
	return nil
}

// send writes one event; the caller has armed the deadline.
func (ws *watchServer) send(typ watch.EventType, obj runtime.Object) error {
	ws.buf.Reset()
	if err := ws.embedded.Encode(shallowCopy(obj), &ws.buf); err != nil {
		return err
	}
	if err := ws.stream.Encode(&metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: ws.buf.Bytes()}}); err != nil {
		return err
	}
	eventsSent.WithLabelValues(ws.resource.name, string(typ)).Inc()
	return nil
}

// sendExpired ends the watch as the apiserver's watch cache does: an ERROR
// event with 410 Expired, and the client relists.
func (ws *watchServer) sendExpired(rvErr *rvError) {
	status := apierrors.NewResourceExpired(rvErr.Error()).Status()
	if err := ws.armDeadline(); err == nil && ws.send(watch.Error, &status) == nil {
		_ = ws.rc.Flush()
	}
}

// ended records why a write failed. net/http cancels the request on a failed
// write, so a stalled client is told from an ended watch by the deadline: a
// write that failed after its own deadline was blocked that long (an ended
// watch expires the deadline at once, before it).
func (ws *watchServer) ended(err error) {
	ws.deadlineMu.Lock()
	stalled := err != nil && !ws.armed.IsZero() && !time.Now().Before(ws.armed)
	ws.deadlineMu.Unlock()
	if stalled {
		watchersCutOff.WithLabelValues(ws.resource.name, cutOffStalled).Inc()
		ws.logger.V(2).Info("Watcher cut off: it stopped reading", "resource", ws.resource.name, "writeTimeout", ws.writeTimeout)
		return
	}
	ws.logger.V(4).Info("Watch ended", "resource", ws.resource.name, "err", err)
}

// armDeadline sets the write deadline for the next batch, unless the watch
// has ended.
func (ws *watchServer) armDeadline() error {
	ws.deadlineMu.Lock()
	defer ws.deadlineMu.Unlock()
	if err := ws.ctx.Err(); err != nil {
		return err
	}
	ws.armed = time.Now().Add(ws.writeTimeout)
	return ws.rc.SetWriteDeadline(ws.armed)
}

// disarmDeadline clears the deadline once a batch is out: over HTTP/2 a
// deadline resets the stream when it passes even with no write pending,
// which would cut off every watcher that is merely idle.
func (ws *watchServer) disarmDeadline() {
	ws.deadlineMu.Lock()
	defer ws.deadlineMu.Unlock()
	if ws.finished || ws.ctx.Err() != nil {
		return
	}
	ws.armed = time.Time{}
	_ = ws.rc.SetWriteDeadline(time.Time{})
}

// expireDeadline runs when the watch ends. Only a write in progress needs
// ending: over HTTP/2 an expired deadline resets the stream (the client sees
// INTERNAL_ERROR, not the end of the watch), so an idle watch ends by
// returning.
func (ws *watchServer) expireDeadline() {
	ws.deadlineMu.Lock()
	defer ws.deadlineMu.Unlock()
	if !ws.finished && !ws.armed.IsZero() {
		_ = ws.rc.SetWriteDeadline(time.Now())
	}
}

// finish clears the deadline for good: a keep-alive connection must not
// carry this watch's deadline on.
func (ws *watchServer) finish() {
	ws.deadlineMu.Lock()
	defer ws.deadlineMu.Unlock()
	ws.finished = true
	_ = ws.rc.SetWriteDeadline(time.Time{})
}
