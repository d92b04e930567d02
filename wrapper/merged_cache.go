package wrapper

import (
	"errors"
	"maps"
	"slices"
	"sync"

	"k8s.io/client-go/tools/cache"

	"github.com/servicegroup/servicegroup/wrapper/watchcache"
)

// Sources of a mergedCache.
const (
	// sourceMain is the informer that always runs.
	sourceMain = iota
	// sourceOnDemand and the sourceExcluded ones (one per label of
	// watchcache.KubeProxyExcluded) are informers run only while clients
	// ask for what they fetch.
	sourceOnDemand
	sourceExcluded
	numSources = sourceExcluded + len(watchcache.KubeProxyExcluded)
)

// holders is each source's latest object for one key (nil: not held). An
// array, not a map: the cache keeps one per object, tens of thousands.
type holders [numSources]any

func (h *holders) empty() bool {
	for _, o := range h {
		if o != nil {
			return false
		}
	}
	return true
}

// mergedEntry is one key of a mergedCache: the merged view's object (the
// one a source set last, or after a source let go, another's) and what
// each source holds.
type mergedEntry struct {
	cur  any
	held holders
}

// errMergedCacheReadOnly: a mergedCache changes only through its sources'
// handlers.
var errMergedCacheReadOnly = errors.New("merged cache: changed only by its sources")

// mergedCache is an informer cache fed by several informers (sources) whose
// selections may overlap or hand an object over to each other (a label
// change moves it from one selection to another). An object stays while any
// source holds it; handler hears of every change of the merged view.
//
// It reads as a cache.Indexer with at most one index of one value per
// object, but keeps only one map of small entries beside the informers' own
// stores (not a second indexer of every object), and the index as a short
// sorted list of keys per value (not a set per value): at 10,000 Services
// that is megabytes less.
type mergedCache struct {
	handler   cache.ResourceEventHandler
	indexName string                       // "" without an index
	indexFunc cache.IndexFunc              // its function
	indexOf   func(obj any) (string, bool) // its value for obj

	mu sync.Mutex // serializes changes and the handler's calls

	dataMu  sync.RWMutex // guards entries and indexed
	entries map[string]*mergedEntry
	indexed map[string][]string // index value -> sorted keys
}

// newMergedCache makes a cache with the one index indexers names (none when
// empty); its function must return at most one value per object.
func newMergedCache(indexers cache.Indexers, handler cache.ResourceEventHandler) *mergedCache {
	m := &mergedCache{handler: handler, entries: map[string]*mergedEntry{}, indexed: map[string][]string{}}
	for name, f := range indexers {
		m.indexName, m.indexFunc = name, f
		m.indexOf = func(obj any) (string, bool) {
			if v, err := f(obj); err == nil && len(v) > 0 {
				return v[0], true
			}
			return "", false
		}
	}
	return m
}

// sourceHandler mirrors one informer into the cache as source src.
func (m *mergedCache) sourceHandler(src int) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { m.change(src, obj, true) },
		UpdateFunc: func(_, obj any) { m.change(src, obj, true) },
		DeleteFunc: func(obj any) { m.change(src, unwrap(obj), false) },
	}
}

// change records that src now holds obj, or (held false) no longer holds
// its key.
func (m *mergedCache) change(src int, obj any, held bool) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if held {
		m.setLocked(src, key, obj)
	} else {
		m.removeLocked(src, key)
	}
}

// setLocked makes src hold obj under key; mu is held.
func (m *mergedCache) setLocked(src int, key string, obj any) {
	m.dataMu.Lock()
	e := m.entries[key]
	var old any
	if e == nil {
		e = &mergedEntry{}
		m.entries[key] = e
	} else {
		old = e.cur
	}
	e.held[src] = obj
	m.setCurrentLocked(key, e, obj)
	m.dataMu.Unlock()
	if old != nil {
		m.handler.OnUpdate(old, obj)
	} else {
		m.handler.OnAdd(obj, false)
	}
}

// setCurrentLocked makes obj key's object in the merged view and keeps the
// index in step; dataMu is held.
func (m *mergedCache) setCurrentLocked(key string, e *mergedEntry, obj any) {
	if m.indexOf != nil {
		was, wasIndexed := "", false
		if e.cur != nil {
			was, wasIndexed = m.indexOf(e.cur)
		}
		now, nowIndexed := m.indexOf(obj)
		if wasIndexed != nowIndexed || was != now {
			if wasIndexed {
				m.unindexLocked(was, key)
			}
			if nowIndexed {
				keys := m.indexed[now]
				if i, found := slices.BinarySearch(keys, key); !found {
					m.indexed[now] = slices.Insert(keys, i, key)
				}
			}
		}
	}
	e.cur = obj
}

func (m *mergedCache) unindexLocked(value, key string) {
	keys := m.indexed[value]
	i, found := slices.BinarySearch(keys, key)
	if !found {
		return
	}
	if len(keys) == 1 {
		delete(m.indexed, value)
		return
	}
	m.indexed[value] = slices.Delete(keys, i, i+1)
}

// removeLocked drops what src held under key; mu is held.
func (m *mergedCache) removeLocked(src int, key string) {
	m.dataMu.Lock()
	e := m.entries[key]
	if e == nil || e.held[src] == nil {
		m.dataMu.Unlock()
		return
	}
	e.held[src] = nil
	old := e.cur
	if e.held.empty() {
		delete(m.entries, key)
		if m.indexOf != nil {
			if was, ok := m.indexOf(old); ok {
				m.unindexLocked(was, key)
			}
		}
		m.dataMu.Unlock()
		m.handler.OnDelete(old)
		return
	}
	for _, other := range e.held {
		if other == nil {
			continue
		}
		if other != old {
			m.setCurrentLocked(key, e, other)
			m.dataMu.Unlock()
			m.handler.OnUpdate(old, other)
			return
		}
		break
	}
	m.dataMu.Unlock()
}

// withdraw removes everything only src held (its informer has stopped).
func (m *mergedCache) withdraw(src int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dataMu.RLock()
	var keys []string
	for key, e := range m.entries {
		if e.held[src] != nil {
			keys = append(keys, key)
		}
	}
	m.dataMu.RUnlock()
	for _, key := range keys {
		m.removeLocked(src, key)
	}
}

// The cache.Indexer methods: reads of the merged view.

func (m *mergedCache) GetByKey(key string) (any, bool, error) {
	m.dataMu.RLock()
	defer m.dataMu.RUnlock()
	if e := m.entries[key]; e != nil {
		return e.cur, true, nil
	}
	return nil, false, nil
}

func (m *mergedCache) Get(obj any) (any, bool, error) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return nil, false, err
	}
	return m.GetByKey(key)
}

func (m *mergedCache) List() []any {
	m.dataMu.RLock()
	defer m.dataMu.RUnlock()
	out := make([]any, 0, len(m.entries))
	for _, e := range m.entries {
		out = append(out, e.cur)
	}
	return out
}

func (m *mergedCache) ListKeys() []string {
	m.dataMu.RLock()
	defer m.dataMu.RUnlock()
	return slices.Collect(maps.Keys(m.entries))
}

func (m *mergedCache) IndexKeys(indexName, indexedValue string) ([]string, error) {
	if indexName != m.indexName || m.indexOf == nil {
		return nil, errors.New("merged cache: no index " + indexName)
	}
	m.dataMu.RLock()
	defer m.dataMu.RUnlock()
	return slices.Clone(m.indexed[indexedValue]), nil
}

func (m *mergedCache) ByIndex(indexName, indexedValue string) ([]any, error) {
	if indexName != m.indexName || m.indexOf == nil {
		return nil, errors.New("merged cache: no index " + indexName)
	}
	m.dataMu.RLock()
	defer m.dataMu.RUnlock()
	keys := m.indexed[indexedValue]
	out := make([]any, 0, len(keys))
	for _, k := range keys {
		out = append(out, m.entries[k].cur)
	}
	return out, nil
}

func (m *mergedCache) Index(indexName string, obj any) ([]any, error) {
	if m.indexOf == nil {
		return nil, errors.New("merged cache: no index " + indexName)
	}
	v, ok := m.indexOf(obj)
	if !ok {
		return nil, nil
	}
	return m.ByIndex(indexName, v)
}

func (m *mergedCache) ListIndexFuncValues(indexName string) []string {
	if indexName != m.indexName || m.indexOf == nil {
		return nil
	}
	m.dataMu.RLock()
	defer m.dataMu.RUnlock()
	return slices.Collect(maps.Keys(m.indexed))
}

func (m *mergedCache) GetIndexers() cache.Indexers {
	if m.indexOf == nil {
		return cache.Indexers{}
	}
	return cache.Indexers{m.indexName: m.indexFunc}
}

func (m *mergedCache) AddIndexers(cache.Indexers) error     { return errMergedCacheReadOnly }
func (m *mergedCache) Add(any) error                        { return errMergedCacheReadOnly }
func (m *mergedCache) Update(any) error                     { return errMergedCacheReadOnly }
func (m *mergedCache) Delete(any) error                     { return errMergedCacheReadOnly }
func (m *mergedCache) Replace([]any, string) error          { return errMergedCacheReadOnly }
func (m *mergedCache) Resync() error                        { return errMergedCacheReadOnly }
func (m *mergedCache) Bookmark(string)                      {}
func (m *mergedCache) LastStoreSyncResourceVersion() string { return "" }

var _ cache.Indexer = (*mergedCache)(nil)
