package testnet

import "net/http"

// RoundTripFunc is an http.RoundTripper made of a function: a test wraps a
// client's transport with it to count or change requests on their way.
type RoundTripFunc func(*http.Request) (*http.Response, error)

// RoundTrip calls f.
func (f RoundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
