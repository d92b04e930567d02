package realnode

import (
	"fmt"
	"os"
	"path/filepath"
)

// writeConfigs writes the node's containerd, registry, CNI and kubelet
// configuration: every setting below was needed on the project's machines
// (see the package README).
func (n *Node) writeConfigs() error {
	files := map[string]string{
		"etc/containerd/config.toml":       n.containerdConfig(),
		"etc/cni/net.d/10-sgrn.conflist":   n.cniConfig(),
		"host/var/lib/kubelet/config.yaml": n.kubeletConfig(),
		"host/etc/kubernetes/kubelet.conf": string(n.Kubeconfig),
		"etc/resolv.conf":                  "nameserver " + n.cfg.Nameserver + "\n",
	}
	hosts := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n",
		"http://"+n.cfg.Registry.Addr, "http://"+n.cfg.Registry.Addr)
	// The mirrored registries resolve through the local one only (server is
	// the local registry too): no fallback to the internet.
	for _, r := range append([]string{n.cfg.Registry.Addr}, MirroredRegistries...) {
		files[filepath.Join("etc/containerd/certs.d", r, "hosts.toml")] = hosts
	}
	for name, data := range files {
		p := n.path(name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			return err
		}
	}
	return nil
}

func (n *Node) containerdConfig() string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  # No CAP_SYS_RESOURCE on these machines: runc cannot lower oom_score_adj.
  restrict_oom_score_adj = true
  # Pod network namespaces under the node's own /run, not the host's /run/netns.
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = %[7]q
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[8]q
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %[9]q
`, n.path("var/lib/containerd"), n.path("run/containerd/state"), n.Socket(), n.Socket()+".ttrpc",
		n.path("opt/containerd"), PauseImage, n.path("run/runc"), n.path("etc/cni/net.d"), n.path("etc/containerd/certs.d"))
}

// cniConfig: a bridge with the node's pod subnet (host-local IPAM, data on
// the node's disk). Pod traffic leaving the subnet is masqueraded to the
// node's address, so replies from the apiserver's address (the root
// namespace, which has no route to pod subnets) come back; the bridge
// plugin re-adds that rule for every pod it wires, after a reboot too.
func (n *Node) cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "sgrn",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": %q
      }
    }
  ]
}
`, n.Net.PodCIDR.String(), n.path("var/lib/cni/networks"))
}

// nodeLeaseSeconds is every kubelet's nodeLeaseDurationSeconds (it renews
// every quarter of it), scaled for the partition steps (partition_test.go).
const nodeLeaseSeconds = 8

func (n *Node) kubeletConfig() string {
	dns := ""
	if n.ClusterDNS != "" {
		// kubeadm's layout (a block list), which build/README.md's sed edits.
		dns = fmt.Sprintf("clusterDNS:\n- %s\n", n.ClusterDNS)
	}
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]q
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[2]q}
authorization: {mode: Webhook}
# cgroup v1 hybrid machines: v1 still works when allowed.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %[3]q
failSwapOn: false
containerRuntimeEndpoint: %[4]q
staticPodPath: %[5]q
podLogsDir: %[6]q
resolvConf: %[7]q
clusterDomain: cluster.local
%[8]s# Every kubelet sees the whole machine (and the other nodes' use) on a
# shared disk: absolute floors, since a percentage of it would measure the
# other users. The test checks for enough free space before it starts.
evictionHard: {memory.available: 100Mi, nodefs.available: 512Mi, imagefs.available: 512Mi, nodefs.inodesFree: 1%%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
maxPods: 40
shutdownGracePeriod: 0s
# Scaled with kube-controller-manager's node lifecycle timings of the
# partition steps (partition_test.go): a renewal every 2 s.
nodeLeaseDurationSeconds: %[10]d
volumePluginDir: %[9]q
`, n.Net.IP.String(), n.cfg.CAFile, n.CgroupRoot(), "unix://"+n.Socket(), "/etc/kubernetes/manifests",
		"/var/log/pods", n.path("etc/resolv.conf"), dns, n.path("usr/libexec/kubernetes/volume-plugins"), nodeLeaseSeconds)
}
