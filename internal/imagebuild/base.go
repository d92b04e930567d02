package imagebuild

import (
	"io/fs"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// NonRoot is the uid and gid the images run as (distroless's "nonroot").
const NonRoot = 65532

// User is the image config's user: numeric, so Kubernetes' runAsNonRoot can
// verify it without reading /etc/passwd.
const User = "65532:65532"

// baseFiles is the whole operating system of the images: user and group
// databases naming root and nonroot, nsswitch.conf so Go's resolver reads
// /etc/hosts before DNS, a writable /tmp and nonroot's home. No shell, no
// package manager, no CA bundle: the binaries reach the apiserver with the
// service account's CA and CoreDNS's upstreams are plain DNS by default.
func baseFiles() []File {
	return []File{
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte(
			"root:x:0:0:root:/root:/sbin/nologin\n" +
				"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{Path: "/etc/nsswitch.conf", Mode: 0o644, Data: []byte("hosts: files dns\n")},
		{Path: "/home/nonroot", Mode: fs.ModeDir | 0o700, UID: NonRoot, GID: NonRoot},
		{Path: "/root", Mode: fs.ModeDir | 0o700},
		{Path: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
	}
}

// BaseLayer is the layer every image starts from; it is the same for every
// platform and image, so registries store it once.
func BaseLayer(mtime time.Time) (v1.Layer, error) {
	return NewLayer(baseFiles(), mtime)
}
