# Sourced by the build scripts under tools/: up_to_date STAMP WANT DIR
# CMD... succeeds when the file STAMP records WANT (the versions the
# commands were built from) and every CMD is an executable in DIR, so
# that a script can do nothing when its build is current.
up_to_date() {
	local stamp="$1" want="$2" dir="$3" c
	shift 3
	[[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] || return 1
	for c in "$@"; do
		[[ -x "$dir/$c" ]] || return 1
	done
}
