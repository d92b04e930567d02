// Package gridname is the one implementation of the unified-name rule,
// shared by gridhosts (which answers {grid}-{ordinal}.{svc}.{ns}.svc names
// with it on every query) and kubectl grid (which explains an answer over
// API objects): which pod, if any, a unified name stands for on a node, and
// which check ruled it out when none does.
//
// The rule reads small forms of the objects (Grid, StatefulSet, Service,
// Pod), made from API objects by GridOf, StatefulSetOf, ServiceOf and PodOf,
// so gridhosts keeps them in its informer caches and the query path does no
// conversion.
package gridname
