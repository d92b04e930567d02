package wrapper

// logOnce remembers, per key, the last problem logged, so a problem is
// logged when it appears or changes, not on every re-filter.
type logOnce map[string]string

// first reports whether problem is new for key, and remembers it.
func (l logOnce) first(key, problem string) bool {
	if l[key] == problem {
		return false
	}
	l[key] = problem
	return true
}

// clear forgets key: its problem went away.
func (l logOnce) clear(key string) { delete(l, key) }
