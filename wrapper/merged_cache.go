package wrapper

import (
	"sync"

	"k8s.io/client-go/tools/cache"
)

// Sources of a mergedCache.
const (
	// sourceMain is the informer that always runs.
	sourceMain = iota
	// sourceOnDemand, sourceProxyNamed and sourceHeadless are informers run
	// only while clients ask for what they fetch.
	sourceOnDemand
	sourceProxyNamed
	sourceHeadless
	numSources
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

// mergedCache is an informer cache fed by several informers (sources) whose
// selections may overlap or hand an object over to each other (a label
// change moves it from one selection to another). An object stays while any
// source holds it; handler hears of every change of the merged view.
type mergedCache struct {
	cache.Indexer
	handler cache.ResourceEventHandler

	mu   sync.Mutex
	held map[string]*holders // key -> what each source holds
}

func newMergedCache(indexers cache.Indexers, handler cache.ResourceEventHandler) *mergedCache {
	return &mergedCache{
		Indexer: cache.NewIndexer(cache.MetaNamespaceKeyFunc, indexers),
		handler: handler,
		held:    map[string]*holders{},
	}
}

// sourceHandler mirrors one informer into the cache as source src.
func (m *mergedCache) sourceHandler(src int) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { m.set(src, obj) },
		UpdateFunc: func(_, obj any) { m.set(src, obj) },
		DeleteFunc: func(obj any) { m.remove(src, unwrap(obj)) },
	}
}

func (m *mergedCache) set(src int, obj any) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.held[key]
	if h == nil {
		h = &holders{}
		m.held[key] = h
	}
	h[src] = obj
	old, exists, _ := m.GetByKey(key)
	_ = m.Add(obj)
	if exists {
		m.handler.OnUpdate(old, obj)
	} else {
		m.handler.OnAdd(obj, false)
	}
}

func (m *mergedCache) remove(src int, obj any) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.removeLocked(src, key)
}

func (m *mergedCache) removeLocked(src int, key string) {
	h := m.held[key]
	if h == nil || h[src] == nil {
		return
	}
	h[src] = nil
	old, exists, _ := m.GetByKey(key)
	if !exists {
		return
	}
	if h.empty() {
		delete(m.held, key)
		_ = m.Delete(old)
		m.handler.OnDelete(old)
		return
	}
	for _, other := range h {
		if other == nil {
			continue
		}
		if other != old {
			_ = m.Add(other)
			m.handler.OnUpdate(old, other)
		}
		return
	}
}

// withdraw removes everything only src held (its informer has stopped).
func (m *mergedCache) withdraw(src int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, h := range m.held {
		if h[src] != nil {
			m.removeLocked(src, key)
		}
	}
}
