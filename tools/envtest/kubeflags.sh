# Sourced by build.sh and node.sh: kube_ldflags VERSION prints the version
# ldflags a release build of a k8s.io/kubernetes command carries
# (kube-apiserver refuses to serve with a compatibility version of v0.0.0,
# and the kubelet reports its version on its Node).
kube_ldflags() {
	local kube="$1" major minor pkg flags="-s -w"
	major="${kube#v}"; major="${major%%.*}"
	minor="${kube#v*.}"; minor="${minor%%.*}"
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		flags+=" -X $pkg.gitVersion=$kube -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
		flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
	done
	printf '%s' "$flags"
}
