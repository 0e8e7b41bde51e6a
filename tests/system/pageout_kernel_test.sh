#!/bin/sh
# Description: zfolio pageout's kernel backend leaves the system as it found it: the swap
# devices, every zram device's disk size and algorithm, the zram devices there are, the THP
# and mTHP settings and zswap's switch are the same after a run at 4k and 64k, after a run
# stopped by SIGINT in the middle and after one stopped by SIGTERM. It needs root, zram and
# no active swap (what the backend itself needs): otherwise it is skipped (77).
# usage: pageout_kernel_test.sh ZFOLIO_BINARY
set -u
zf=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

snapshot() {
	cat /proc/swaps
	for d in /sys/block/zram*; do [ -e "$d" ] && echo "$d"; done
	for f in /sys/kernel/mm/transparent_hugepage/enabled \
		/sys/kernel/mm/transparent_hugepage/defrag \
		/sys/kernel/mm/transparent_hugepage/hugepages-*/enabled \
		/sys/block/zram*/comp_algorithm /sys/block/zram*/disksize \
		/sys/block/zram*/initstate /sys/module/zswap/parameters/enabled; do
		[ -r "$f" ] && echo "$f: $(cat "$f")"
	done
}

same_as_before() {
	snapshot >"$tmp/after"
	if diff "$tmp/before" "$tmp/after" >"$tmp/diff"; then
		echo "ok: $1: the system is as it was"
	else
		echo "FAIL: $1 changed the system:" >&2
		sed 's/^/  | /' "$tmp/diff" >&2
		fail=1
	fi
}

snapshot >"$tmp/before"
"$zf" pageout --backend kernel --size 4m --repeat 2 --unit 4k,64k --json \
	>"$tmp/out" 2>"$tmp/err"
got=$?
if [ "$got" -eq 77 ]; then
	echo "skipped: $(cat "$tmp/err")"
	exit 77
fi
if [ "$got" -ne 0 ]; then
	echo "FAIL: the kernel backend exited $got:" >&2
	sed 's/^/  | /' "$tmp/err" >&2
	fail=1
fi
same_as_before "a run at 4k and 64k"
[ "$(grep -c '"backend":"kernel"' "$tmp/out")" -eq 2 ] || {
	echo "FAIL: expected two kernel runs:" >&2; cat "$tmp/out" >&2; fail=1
}
# The pages really went out and came back, over the 2 timed iterations: 1024 pages each
# way per iteration at 4k, 64 folios of 64k.
grep -q '"unit_name":"4k".*"pswpout":2048,"pswpin":2048,' "$tmp/out" || {
	echo "FAIL: 4k: expected 1024 pages out and in per iteration" >&2
	grep '"unit_name":"4k"' "$tmp/out" >&2; fail=1
}
grep -q '"unit_name":"64k".*"swpout_64k":128,' "$tmp/out" || {
	echo "FAIL: 64k: expected 64 folios of 64k out per iteration" >&2
	grep '"unit_name":"64k"' "$tmp/out" >&2; fail=1
}
# And back in whole, unless the kernel cannot (zswap enabled since boot): then the run
# must say it is degraded.
grep -Eq '"unit_name":"64k".*("swpin_64k":128,|"degraded":true)' "$tmp/out" || {
	echo "FAIL: 64k: expected 64 folios of 64k in per iteration, or the run flagged" >&2
	grep '"unit_name":"64k"' "$tmp/out" >&2; fail=1
}

# Stopped in the middle: the settings are put back, and the exit code says which signal.
for sig in INT:2 TERM:15; do
	num=${sig#*:}
	sig=${sig%:*}
	"$zf" pageout --backend kernel --size 64m --repeat 1000 --unit 64k \
		>"$tmp/out" 2>"$tmp/err" &
	pid=$!
	# Wait until it has set zram up (swap active), then stop it.
	i=0
	while [ $i -lt 100 ] && ! grep -q zram /proc/swaps; do
		sleep 0.1
		i=$((i + 1))
	done
	sleep 0.5
	kill -"$sig" "$pid"
	wait "$pid"
	got=$?
	want=$((128 + num))
	if [ "$got" -ne "$want" ]; then
		echo "FAIL: SIG$sig: exited $got, expected $want:" >&2
		sed 's/^/  | /' "$tmp/err" >&2
		fail=1
	fi
	grep -q 'settings restored' "$tmp/err" || {
		echo "FAIL: SIG$sig: no 'settings restored' message" >&2; fail=1
	}
	same_as_before "a run stopped by SIG$sig"
done
exit $fail
