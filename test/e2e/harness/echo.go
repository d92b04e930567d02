package harness

import (
	"bufio"
	"fmt"
	"net/http"
	"strings"
)

// echoHandler answers like SuperEdge's echoserver: who served the request.
// Tests and the demo grep the "pod name:" and "node name:" lines.
func echoHandler(pod, namespace, node, ip string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "Hostname: %s\n\nPod Information:\n", pod)
		fmt.Fprintf(w, "\tnode name: %s\n\tpod name: %s\n\tpod namespace: %s\n\tpod IP: %s\n\n", node, pod, namespace, ip)
		fmt.Fprintf(w, "Request Information:\n\tclient address: %s\n\thost: %s\n\turl: %s\n", r.RemoteAddr, r.Host, r.URL.RequestURI())
	})
}

// Echo is what an echo answer says.
type Echo struct {
	Pod, Node, PodIP, Client string
}

// ParseEcho reads an echo answer; fields it lacks stay empty.
func ParseEcho(body string) Echo {
	var e Echo
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ": ")
		if !ok {
			continue
		}
		switch k {
		case "pod name":
			e.Pod = v
		case "node name":
			e.Node = v
		case "pod IP":
			e.PodIP = v
		case "client address":
			e.Client = v
		}
	}
	return e
}
