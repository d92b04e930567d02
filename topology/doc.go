// Package topology is the one implementation of SuperEdge's topology rule,
// shared by the wrapper (which endpoints kube-proxy on a node sees), gridhosts
// (which endpoints a headless grid name answers with) and kubectl grid (which
// explains both): the topologyKeys annotation is a list of node label keys
// tried in order; the first key for which at least one usable endpoint's node
// shares this node's value of it wins, and only those endpoints are served.
package topology
