// Package wrapper is the application-grid-wrapper process: its options and
// Server, the informers on upstream and the Syncer that filters what they
// deliver for this node into the watch cache (package watchcache), the
// fetches made only while a client asks, the snapshot that stands in for an
// unreachable upstream (package snapshot), and the guards in front of the
// views it serves: kube-proxy's and the DNS view. The site stream is package
// sitestream. See README.md.
package wrapper
