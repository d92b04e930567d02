// Package sitestream shares one cloud stream of the Services and
// EndpointSlices kube-proxy selects among the wrappers of a site: they elect
// a leader by Lease (elect.go, members.go), every wrapper mirrors what its
// source sends into caches (cache.go), the leader serves them to its peers
// as a view of the watch cache (serve.go), and a follower's informers read
// from the leader while there is a usable one (route.go). Package siteid
// holds how they name each other: identities, the Lease's name, the
// members heard of. See README.md.
package sitestream
