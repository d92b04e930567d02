package watchcache

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

	"github.com/servicegroup/servicegroup/wrapper/internal/latencystages"
)

// watchBatch is how many events a watch takes from the log and writes under
// one write deadline.
const watchBatch = 256

// watchServer streams one watcher's events to its client like the
// apiserver's WatchServer: the negotiated stream serializer and framer, each
// object encoded into a WatchEvent, a flush after every batch.
//
// Every batch of writes runs under a watchdog, so a client that stops
// reading is cut off after writeTimeout whatever the socket buffers hold: when
// it fires, it expires the write deadline, which ends the blocked write. The
// end of the watch (timeout, client gone) expires it too. A batch that is
// written in time sets no deadline at all: over HTTP/2 every
// SetWriteDeadline is a round trip through the connection's serve loop, two
// per event on a quiet watch.
type watchServer struct {
	ctx          context.Context // ends with the watch (timeout or client gone)
	logger       klog.Logger
	resource     *Served
	watcher      *Watcher // nil when the watch starts with 410 Expired
	writeTimeout time.Duration

	w        http.ResponseWriter
	rc       *http.ResponseController
	encoder  runtime.Encoder // the stream serializer: one WatchEvent per frame
	embedded runtime.Encoder // the object inside a WatchEvent
	framer   runtime.Framer
	stream   streaming.Encoder
	buf      bytes.Buffer // the embedded object, reused

	// deadlineMu orders the batches against the watchdog and the watch's
	// end, which expire the write deadline from other goroutines.
	deadlineMu sync.Mutex
	watchdog   *time.Timer // cutOff, writeTimeout after a batch starts
	batchStart time.Time   // when the batch being written started; zero: none
	stalled    bool        // the watchdog cut a batch off
	finished   bool        // serve returned: the deadline is the connection's again
}

// serve writes the response header, then initial (or 410 Expired for a
// resourceVersion the store no longer has) and every event of the watcher
// until the watch ends.
func (ws *watchServer) serve(mediaType string, initial []Event, expired *VersionError) {
	ws.watchdog = time.AfterFunc(time.Hour, ws.cutOff)
	ws.watchdog.Stop()
	stopExpiring := context.AfterFunc(ws.ctx, ws.expireDeadline)
	defer func() {
		stopExpiring()
		ws.watchdog.Stop()
		ws.finish()
	}()

	ws.w.Header().Set("Content-Type", mediaType)
	ws.w.Header().Set("Transfer-Encoding", "chunked")
	ws.w.WriteHeader(http.StatusOK)
	if err := ws.startBatch(); err != nil {
		return
	}
	_ = ws.rc.Flush()
	ws.endBatch()
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
	store := ws.resource.Store
	var events []Event
	for {
		var (
			wait  <-chan struct{}
			err   error
			rvErr *VersionError
		)
		events, wait, err = store.Next(ws.watcher, events[:0], watchBatch)
		if errors.As(err, &rvErr) {
			watchersCutOff.WithLabelValues(ws.resource.Name, cutOffBehind).Inc()
			ws.logger.V(2).Info("Watcher cut off: it fell behind the event log", "resource", ws.resource.Name)
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
		for _, ev := range events {
			latencystages.Stamp(ev.Object, "woke")
		}
		if err := ws.sendAll(events); err != nil {
			ws.ended(err)
			return
		}
	}
}

// sendAll writes events in batches, each under the watchdog, and flushes
// after each batch.
func (ws *watchServer) sendAll(events []Event) error {
	for len(events) > 0 {
		batch := events[:min(len(events), watchBatch)]
		events = events[len(batch):]
		if err := ws.startBatch(); err != nil {
			return err
		}
		for _, ev := range batch {
			if err := ws.send(ev.Type, ev.Object); err != nil {
				return err
			}
		}
		for _, ev := range batch {
			latencystages.Stamp(ev.Object, "encoded")
		}
		if err := ws.rc.Flush(); err != nil {
			return err
		}
		for _, ev := range batch {
			latencystages.Stamp(ev.Object, "flushed")
		}
		ws.endBatch()
	}
	return nil
}

// send writes one event; the caller has started a batch.
func (ws *watchServer) send(typ watch.EventType, obj runtime.Object) error {
	ws.buf.Reset()
	// obj is this watcher's own (the store stamps a copy per watcher), so
	// the encoder may set its TypeMeta.
	if err := ws.embedded.Encode(obj, &ws.buf); err != nil {
		return err
	}
	if err := ws.stream.Encode(&metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: ws.buf.Bytes()}}); err != nil {
		return err
	}
	eventsSent.WithLabelValues(ws.resource.Name, string(typ)).Inc()
	return nil
}

// sendExpired ends the watch as the apiserver's watch cache does: an ERROR
// event with 410 Expired, and the client relists.
func (ws *watchServer) sendExpired(rvErr *VersionError) {
	status := apierrors.NewResourceExpired(rvErr.Error()).Status()
	if err := ws.startBatch(); err == nil && ws.send(watch.Error, &status) == nil {
		_ = ws.rc.Flush()
	}
}

// ended records why a write failed: net/http cancels the request on a failed
// write, so a stalled client is told from an ended watch by the watchdog.
func (ws *watchServer) ended(err error) {
	ws.deadlineMu.Lock()
	stalled := err != nil && ws.stalled
	ws.deadlineMu.Unlock()
	if stalled {
		watchersCutOff.WithLabelValues(ws.resource.Name, cutOffStalled).Inc()
		ws.logger.V(2).Info("Watcher cut off: it stopped reading", "resource", ws.resource.Name, "writeTimeout", ws.writeTimeout)
		return
	}
	ws.logger.V(4).Info("Watch ended", "resource", ws.resource.Name, "err", err)
}

// startBatch starts the watchdog for the next batch, unless the watch has
// ended.
func (ws *watchServer) startBatch() error {
	ws.deadlineMu.Lock()
	defer ws.deadlineMu.Unlock()
	if err := ws.ctx.Err(); err != nil {
		return err
	}
	ws.batchStart = time.Now()
	ws.watchdog.Reset(ws.writeTimeout)
	return nil
}

// endBatch stops the watchdog once a batch is out. No deadline is left
// behind: over HTTP/2 a deadline resets the stream when it passes even with
// no write pending, which would cut off every watcher that is merely idle.
func (ws *watchServer) endBatch() {
	ws.deadlineMu.Lock()
	defer ws.deadlineMu.Unlock()
	ws.batchStart = time.Time{}
	ws.watchdog.Stop()
}

// cutOff runs when the watchdog fires: a batch has been blocked for
// writeTimeout, so its write is ended by expiring the deadline. A late run
// for a batch that has ended meanwhile finds no batch, or a newer one, and
// does nothing.
func (ws *watchServer) cutOff() {
	ws.deadlineMu.Lock()
	defer ws.deadlineMu.Unlock()
	if ws.finished || ws.batchStart.IsZero() || time.Since(ws.batchStart) < ws.writeTimeout {
		return
	}
	ws.stalled = true
	_ = ws.rc.SetWriteDeadline(time.Now())
}

// expireDeadline runs when the watch ends. Only a write in progress needs
// ending: over HTTP/2 an expired deadline resets the stream (the client sees
// INTERNAL_ERROR, not the end of the watch), so an idle watch ends by
// returning.
func (ws *watchServer) expireDeadline() {
	ws.deadlineMu.Lock()
	defer ws.deadlineMu.Unlock()
	if !ws.finished && !ws.batchStart.IsZero() {
		_ = ws.rc.SetWriteDeadline(time.Now())
	}
}

// finish clears the deadline for good: a keep-alive connection must not
// carry an expired deadline of this watch on.
func (ws *watchServer) finish() {
	ws.deadlineMu.Lock()
	defer ws.deadlineMu.Unlock()
	ws.finished = true
	_ = ws.rc.SetWriteDeadline(time.Time{})
}
