package imagebuild

import "strings"

// ManifestRepository is the repository prefix of our images in
// build/manifests: they run ManifestRepository/NAME:<build/VERSION>.
const ManifestRepository = "servicegroup"

// Images are the project's three images; their names are the ones the
// manifests in build/manifests reference (ManifestRepository/NAME).
var Images = []Spec{
	{
		Name:        "application-grid-controller",
		Package:     "./cmd/application-grid-controller",
		Binary:      "/application-grid-controller",
		Description: "Reconciles DeploymentGrids, StatefulSetGrids and ServiceGrids (superedge.io/v1).",
	},
	{
		Name:        "application-grid-wrapper",
		Package:     "./cmd/application-grid-wrapper",
		Binary:      "/application-grid-wrapper",
		Description: "Serves kube-proxy Services and EndpointSlices filtered to the node's nodeunit.",
	},
	{
		Name:        "coredns-gridhosts",
		Package:     "./cmd/coredns",
		Binary:      "/coredns",
		Ports:       []string{"53/tcp", "53/udp"},
		Description: "CoreDNS with the gridhosts plugin (unified StatefulSetGrid names).",
	},
}

// Lookup returns the spec of the image named name.
func Lookup(name string) (Spec, bool) {
	for _, s := range Images {
		if s.Name == name {
			return s, true
		}
	}
	return Spec{}, false
}

// VersionLDFlags stamps version into a binary's internal/version package.
func VersionLDFlags(version string) string {
	return "-X github.com/servicegroup/servicegroup/internal/version.Version=" + version
}

// ContainerdName is ref as container runtimes store it after normalising
// a Docker reference (servicegroup/x:v -> docker.io/servicegroup/x:v). An
// imported layout must carry this form: the kubelet asks the runtime for the
// normalised name, and containerd keeps an OCI layout's name verbatim.
func ContainerdName(ref string) string {
	first, _, found := strings.Cut(ref, "/")
	switch {
	case !found:
		return "docker.io/library/" + ref
	case strings.ContainsAny(first, ".:") || first == "localhost":
		return ref
	default:
		return "docker.io/" + ref
	}
}
