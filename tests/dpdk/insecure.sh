# insecure.sh - sourced by the dpdk tests. EAL's -d refuses a plugin in a
# directory that is, or lies below, a world-writable one ("directory path
# /tmp is world-writable and insecure"), so a checkout under /tmp cannot
# load the driver where it was built. insecure PATH: true when PATH or one
# of its ancestors has the others' write bit. private_dir: a new 0700
# directory under $HOME (whose ancestors are expected to be sound), for a
# copy of what EAL must load.
insecure() {
	d=$(readlink -f "$1")
	while :; do
		case $(stat -c %a "$d") in
		*[2367]) return 0 ;;
		esac
		[ "$d" = / ] && return 1
		d=$(dirname "$d")
	done
}

private_dir() {
	mktemp -d "${HOME:-/root}/.uslab-dpdk-test.XXXXXX"
}
