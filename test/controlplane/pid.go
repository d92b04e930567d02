package controlplane

// APIServerPID is the running kube-apiserver's process id (0 if it is not
// running): benchmarks read its CPU and memory from /proc.
func (cp *ControlPlane) APIServerPID() int {
	if p := cp.proc(KubeAPIServer); p != nil {
		return p.PID()
	}
	return 0
}
