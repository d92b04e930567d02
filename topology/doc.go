// Package topology is the one implementation of SuperEdge's topology rule,
// shared by the wrapper (which endpoints kube-proxy on a node sees), gridhosts
// (which endpoints a headless grid name answers with) and kubectl grid (which
// explains both): the topologyKeys annotation is a list of node label keys
// tried in order; the first key for which at least one usable endpoint's node
// shares this node's value of it wins, and only those endpoints are served.
//
// keys.go parses the annotation, usable.go says which endpoints count,
// decide.go chooses the key, filter.go applies the choice to a Service's
// EndpointSlices and Endpoints, and endpointnodes.go remembers which nodes
// each filtered Service's endpoints are on, so that a node's new labels
// re-filter only the Services they can change.
package topology
