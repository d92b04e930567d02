// Command echoserver stands in for SuperEdge's echoserver image in the
// real-node test: on :8080 it answers who served the request, in the
// SuperEdge's format ("node name: ...", "pod name: ..."), from the environment
// the examples' pod templates set (NODE_NAME, POD_NAME, POD_NAMESPACE, POD_IP).
package main

import (
	"fmt"
	"log"
	"net/http"
	"os"
)

func main() {
	pod, node := os.Getenv("POD_NAME"), os.Getenv("NODE_NAME")
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "Hostname: %s\n\nPod Information:\n", pod)
		fmt.Fprintf(w, "\tnode name: %s\n\tpod name: %s\n\tpod namespace: %s\n\tpod IP: %s\n\n",
			node, pod, os.Getenv("POD_NAMESPACE"), os.Getenv("POD_IP"))
		fmt.Fprintf(w, "Request Information:\n\tclient address: %s\n\thost: %s\n\turl: %s\n", r.RemoteAddr, r.Host, r.URL.RequestURI())
	})
	log.Fatal(http.ListenAndServe(":8080", nil))
}
