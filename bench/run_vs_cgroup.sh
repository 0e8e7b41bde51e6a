#!/bin/bash
# run_vs_cgroup.sh - real programs under a limit of half their peak: zfolio run against
# the same program in a memory cgroup (v1: memory.limit_in_bytes) with the kernel's zram
# as its swap, alternated, side by side in one run.
#
# usage: bench/run_vs_cgroup.sh [--repeat N] [--only NAME] BUILD_DIR > results.jsonl
#
# Workloads (NAME): heap (tests/run/run_heap 256: glibc malloc), python (python3 building
# 600,000 strings and 60,000 lists, a SHA-256 over them), make (make -j2 of the library's
# sources), redis (redis-server: DEBUG POPULATE 225000 keys of 200 bytes, DEBUG DIGEST).
# Each one's peak is measured first under zfolio run without a limit (the run's resident
# peak); the limit is half of it, for both sides. Per run, one JSON line: elapsed and CPU
# seconds, pages swapped out and in, the compressed pool's peak and the ratio; a table of
# medians on stderr at the end.
#
# The kernel side as zfolio pageout --backend kernel sets it up: zram0 (lz4, 2 GiB) the
# only swap, at the highest priority; everything put back at the end, also on an error or
# SIGINT (swapoff, zram reset, its algorithm, the cgroup removed). zswap is never touched.
# Needs root, zram0 unused, no swap active, cgroup v1's memory controller.
set -eu
repeat=3 only=
while [ $# -gt 1 ]; do
	case $1 in
	--repeat) repeat=$2; shift 2 ;;
	--only) only=$2; shift 2 ;;
	*) break ;;
	esac
done
[ $# -eq 1 ] || { sed -n '2,20p' "$0" >&2; exit 2; }
B=$(cd "$1" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
Z=$B/zfolio
z=/sys/block/zram0
[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 77; }
[ -e $z ] && [ "$(cat $z/disksize)" = 0 ] || { echo "zram0 missing or in use" >&2; exit 77; }
[ "$(wc -l < /proc/swaps)" -le 1 ] || { echo "a swap device is active already" >&2; exit 77; }
parent=/sys/fs/cgroup/memory$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup)
[ -d "$parent" ] || { echo "no cgroup v1 memory controller" >&2; exit 77; }
cg=$parent/zfolio-bench.$$
T=$(mktemp -d)
old_algo=$(sed 's/.*\[\(.*\)\].*/\1/' $z/comp_algorithm)
restore() {
	swapoff /dev/zram0 2> /dev/null || true
	echo 1 > $z/reset
	echo "$old_algo" > $z/comp_algorithm
	[ -d "$cg" ] && rmdir "$cg" 2> /dev/null || true
	rm -rf "$T"
}
trap restore EXIT
trap 'exit 130' INT TERM
echo lz4 > $z/comp_algorithm
echo 2G > $z/disksize
mkswap /dev/zram0 > /dev/null
swapon -p 32767 /dev/zram0

# The workloads: each a command line (run by sh -c), and zfolio run's options.
cat > "$T/redis.sh" << 'EOF'
port=$((21000 + $$ % 20000))
redis-server --port $port --bind 127.0.0.1 --save "" --appendonly no --dir /tmp \
	--enable-debug-command yes > /dev/null &
while [ "$(redis-cli -p $port ping 2> /dev/null)" != PONG ]; do sleep 0.05; done
redis-cli -p $port debug populate 225000 key 200 > /dev/null
redis-cli -p $port debug digest
redis-cli -p $port shutdown nosave > /dev/null 2>&1
wait
EOF
names="heap python make redis"
cmd_heap="$B/tests/run/run_heap 256"
cmd_python="/usr/bin/python3 $SRC/tests/run/objs.py"
cmd_make="rm -rf $T/mk && mkdir $T/mk && make -s -j2 -C $T/mk -f $SRC/tests/run/library.mk SRC=$SRC"
cmd_redis="sh $T/redis.sh"
# redis: 4 KiB units, as its test; with 2 MiB frames each miss of the digest's walk in
# hash order reads a frame back (docs/run.md).
opt_redis="--frame none --unit 4k"

vm() { awk -v k="$1" '$1 == k { print $2 }' /proc/vmstat; }
now() { date +%s.%N; }

# One run of workload $1 on side $2 (kernel|zfolio) under limit $3: a JSON line.
run_one() {
	local name=$1 side=$2 limit=$3 cmd opts t0 t1 out0 in0 cpu
	eval "cmd=\$cmd_$name opts=\${opt_$name:-}"
	sync
	echo 3 > /proc/sys/vm/drop_caches
	out0=$(vm pswpout) in0=$(vm pswpin)
	if [ "$side" = kernel ]; then
		mkdir "$cg"
		echo "$limit" > "$cg/memory.limit_in_bytes"
		echo 0 > $z/mem_used_max
		# The pool's ratio at its fullest: sampled every 0.1 s while the program runs.
		( best=0; while :; do
			set -- $(cat $z/mm_stat)
			[ "$1" -gt "$best" ] && best=$1 && echo "$1 $2" > "$T/ratio"
			sleep 0.1; done ) &
		sampler=$!
		t0=$(now)
		/usr/bin/time -f "%U %S" -o "$T/cpu" sh -c "echo \$\$ > $cg/cgroup.procs && exec sh -c '$cmd'" \
			> "$T/out" 2> "$T/err" || { echo "$name kernel: $(tail -3 "$T/err")" >&2; }
		t1=$(now)
		kill $sampler; wait $sampler 2> /dev/null || true
		peak=$(cat "$cg/memory.max_usage_in_bytes")
		rmdir "$cg"
		pool=$(awk '{ print $5 }' $z/mm_stat)
		read -r orig compr < "$T/ratio" 2> /dev/null || { orig=0; compr=0; }
		rm -f "$T/ratio"
		swpout=$(($(vm pswpout) - out0)) swpin=$(($(vm pswpin) - in0))
	else
		t0=$(now)
		# shellcheck disable=SC2086 # the options are words
		/usr/bin/time -f "%U %S" -o "$T/cpu" "$Z" run --limit "$limit" --json "$T/sum.json" \
			$opts -- sh -c "$cmd" > "$T/out" 2> "$T/err" || { echo "$name zfolio: $(tail -3 "$T/err")" >&2; }
		t1=$(now)
		f() { sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" "$T/sum.json"; }
		peak=$(f resident_max) pool=$(f pool_max) orig=$(f stored_bytes) compr=$(f compressed_bytes)
		swpout=$(f swpout) swpin=$(f swpin)
		[ "$(($(vm pswpout) - out0))" -eq 0 ] || echo "$name: the kernel swapped during a zfolio run" >&2
	fi
	cpu=$(awk '{ print $1 + $2 }' "$T/cpu")
	sum=$(md5sum < "$T/out" | cut -c1-8)
	printf '{"workload":"%s","side":"%s","limit":%s,"elapsed_s":%.3f,"cpu_s":%s,"swpout":%s,"swpin":%s,"peak_bytes":%s,"pool_max":%s,"stored_bytes":%s,"compressed_bytes":%s,"output":"%s"}\n' \
		"$name" "$side" "$limit" "$(echo "$t1 - $t0" | bc)" "$cpu" "$swpout" "$swpin" \
		"$peak" "$pool" "${orig:-0}" "${compr:-0}" "$sum"
}

for name in $names; do
	[ -z "$only" ] || [ "$only" = "$name" ] || continue
	eval "cmd=\$cmd_$name opts=\${opt_$name:-}"
	# shellcheck disable=SC2086
	"$Z" run --json "$T/sum.json" $opts -- sh -c "$cmd" > /dev/null 2>&1
	peak=$(sed -n 's/.*"resident_max":\([0-9]*\).*/\1/p' "$T/sum.json")
	limit=$((peak / 2 / 1048576 * 1048576))
	echo "$name: peak $((peak >> 20)) MiB under zfolio run without a limit; limit $((limit >> 20)) MiB" >&2
	for i in $(seq "$repeat"); do
		run_one "$name" kernel "$limit" | tee -a "$T/all.jsonl"
		run_one "$name" zfolio "$limit" | tee -a "$T/all.jsonl"
	done
done

# Medians, a line per workload and side.
python3 - "$T/all.jsonl" << 'EOF' >&2
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("%-8s %-7s %6s %9s %7s %10s %10s %8s %6s" % ("workload", "side", "limit", "elapsed", "cpu", "swpout", "swpin", "pool", "ratio"))
for w in dict.fromkeys(r["workload"] for r in rows):
    for s in ("kernel", "zfolio"):
        rs = [r for r in rows if r["workload"] == w and r["side"] == s]
        if not rs:
            continue
        m = lambda k: statistics.median(r[k] for r in rs)
        ratio = m("stored_bytes") / m("compressed_bytes") if m("compressed_bytes") else 0
        print("%-8s %-7s %5dM %8.2fs %6.2fs %10d %10d %7.1fM %6.2f" % (w, s, rs[0]["limit"] >> 20, m("elapsed_s"), m("cpu_s"), m("swpout"), m("swpin"), m("pool_max") / 2**20, ratio))
EOF
