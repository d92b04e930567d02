// Package siteid holds how the wrappers of a site name each other: the
// identity a wrapper writes into its site's Lease and sends its peers
// (identity.go), the Lease's name (lease.go), the answer a wrapper gives
// at /site (view.go) and the bounded set of the site's wrappers it has
// heard of (members.go). What is read here comes from the Lease and from
// peers; it is apart from sitestream so that fuzzing it compiles only what
// it needs, not client-go and the apiserver.
package siteid
