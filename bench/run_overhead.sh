#!/bin/bash
# run_overhead.sh - what zfolio run costs a program without a limit: the plain program
# and the same under zfolio run, alternated, side by side in one run.
#
# usage: bench/run_overhead.sh [--repeat N] [--only NAME] [--zfolio "OPTIONS"] BUILD_DIR
#        > results.jsonl
#
# Workloads (NAME): true (/bin/true: zfolio run's startup), heap (tests/run/run_heap 256:
# glibc malloc), python (python3 building 600,000 strings and 60,000 lists, a SHA-256 over
# them: pymalloc's 1 MiB arenas and malloc), make (make -j2 of the library's sources).
# --zfolio: options for zfolio run (default none: 64 KiB units in 2 MiB frames), say
# "--frame none". Per run, one JSON line: elapsed and CPU seconds, the largest resident
# set of the program's processes (plain: its maximum RSS; zfolio: also the run's resident
# peak), the output's checksum (the same on both sides, or the line says so). A table of
# medians and ratios on stderr at the end. Touches no system setting.
set -eu
repeat=10 only= zopts=
while [ $# -gt 1 ]; do
	case $1 in
	--repeat) repeat=$2; shift 2 ;;
	--only) only=$2; shift 2 ;;
	--zfolio) zopts=$2; shift 2 ;;
	*) break ;;
	esac
done
[ $# -eq 1 ] || { sed -n '2,16p' "$0" >&2; exit 2; }
B=$(cd "$1" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
Z=$B/zfolio
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
trap 'exit 130' INT TERM

names="true heap python make"
cmd_true="/bin/true"
cmd_heap="$B/tests/run/run_heap 256"
cmd_python="/usr/bin/python3 $SRC/tests/run/objs.py"
cmd_make="rm -rf $T/mk && mkdir $T/mk && make -s -j2 -C $T/mk -f $SRC/tests/run/library.mk SRC=$SRC"

now() { date +%s.%N; }

# One run of workload $1 on side $2 (plain|zfolio): a JSON line.
run_one() {
	local name=$1 side=$2 cmd t0 t1 peak=0
	eval "cmd=\$cmd_$name"
	rm -f "$T/sum.json"
	t0=$(now)
	if [ "$side" = plain ]; then
		/usr/bin/time -f "%U %S %M" -o "$T/cpu" sh -c "$cmd" > "$T/out" 2> "$T/err" ||
			echo "$name plain: $(tail -3 "$T/err")" >&2
	else
		# shellcheck disable=SC2086 # the options are words
		/usr/bin/time -f "%U %S %M" -o "$T/cpu" "$Z" run --json "$T/sum.json" $zopts \
			-- sh -c "$cmd" > "$T/out" 2> "$T/err" || echo "$name zfolio: $(tail -3 "$T/err")" >&2
		peak=$(sed -n 's/.*"resident_max":\([0-9]*\).*/\1/p' "$T/sum.json")
	fi
	t1=$(now)
	printf '{"workload":"%s","side":"%s","zfolio_options":"%s","elapsed_s":%.3f,"cpu_s":%s,"maxrss_kib":%s,"resident_max":%s,"output":"%s"}\n' \
		"$name" "$side" "$zopts" "$(echo "$t1 - $t0" | bc)" "$(awk '{ print $1 + $2 }' "$T/cpu")" \
		"$(awk '{ print $3 }' "$T/cpu")" "${peak:-0}" "$(md5sum < "$T/out" | cut -c1-8)"
}

for name in $names; do
	[ -z "$only" ] || [ "$only" = "$name" ] || continue
	echo "$name: $repeat runs a side, alternated" >&2
	for i in $(seq "$repeat"); do
		run_one "$name" plain | tee -a "$T/all.jsonl"
		run_one "$name" zfolio | tee -a "$T/all.jsonl"
	done
done

python3 - "$T/all.jsonl" << 'EOF' >&2
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("%-8s %-7s %9s %9s %9s %9s %8s %s" % ("workload", "side", "median", "min", "max", "cpu", "maxrss", "vs plain"))
for w in dict.fromkeys(r["workload"] for r in rows):
    med = {}
    for s in ("plain", "zfolio"):
        rs = [r for r in rows if r["workload"] == w and r["side"] == s]
        e = [r["elapsed_s"] for r in rs]
        med[s] = statistics.median(e)
        vs = "%.2fx" % (med[s] / med["plain"]) if s == "zfolio" and med["plain"] else ""
        print("%-8s %-7s %8.3fs %8.3fs %8.3fs %8.2fs %7dM %s" % (w, s, med[s], min(e), max(e), statistics.median(r["cpu_s"] for r in rs), statistics.median(r["maxrss_kib"] for r in rs) / 1024, vs))
    outs = {r["output"] for r in rows if r["workload"] == w}
    if len(outs) > 1:
        print("%s: the outputs differ: %s" % (w, sorted(outs)))
EOF
