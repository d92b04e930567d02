package wrapper

import "github.com/servicegroup/servicegroup/wrapper/watchcache"

// kubeProxyResources are what kube-proxy's view serves, in the order of
// the snapshot's sections.
var kubeProxyResources = []*watchcache.Resource{watchcache.Services, watchcache.Endpoints, watchcache.EndpointSlices, watchcache.Nodes}
