// Package metricscert signs the serving certificates of the wrappers' and
// the nodes' CoreDNS's secure-metrics ports (and issues the controller's
// own, ServeFromCA), so that a scraper verifies them against one CA and a
// process that takes a node's port first never completes a verified
// handshake (and never receives the scrape token).
//
// A wrapper or a node's CoreDNS asks (RequestServingCertificate) through
// the CertificateSigningRequest API with signer SignerName, authenticated
// by its pod-bound ServiceAccount token; the
// apiserver records the pod's node in the request's user extra
// (authentication.kubernetes.io/node-name), which the pod cannot forge.
// The signer approves and signs a request only when every name it asks for
// is that node's: its name, or an address in the Node's status. Anything
// else is denied with a reason. The CA lives in a Secret it creates, and its
// certificate is published in a ConfigMap beside each ServiceMonitor.
package metricscert
