#!/bin/sh
# codec_vs_baseline.sh - "zfolio bench codec" against a bare loop over liblz4/libzstd.
#
# For each image, runs both programs ROUNDS times on each case (codec x unit), one right
# after the other, pinned to CPU (default 1); each run reports the median of REPEAT
# passes. Prints, per image x codec x unit: both ratios (they must be equal) and the
# median over rounds of each program's MB/s, with zfolio / baseline. RAW=FILE keeps the
# JSON lines of every run.
#
# usage: bench/codec_vs_baseline.sh BUILD_DIR IMAGE...
#        (env: ROUNDS=3 REPEAT=5 CPU=1 RAW=)
set -eu
build=$1
shift
rounds=${ROUNDS:-3}
repeat=${REPEAT:-5}
cpu=${CPU:-1}
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT INT TERM

for img in "$@"; do
	for r in $(seq "$rounds"); do
		echo "round $r/$rounds: $img" >&2
		# Each case back to back in both programs, pinned to one CPU, so that both see
		# the same moment of a shared machine.
		for codec in lz4 zstd:1; do
			for unit in 4096 65536; do
				taskset -c "$cpu" "$build/zfolio" bench codec --image "$img" --codec "$codec" \
					--unit "$unit" --repeat "$repeat" --json >>"$tmp"
				taskset -c "$cpu" "$build/bench/codec_baseline" "$img" "$codec" "$unit" \
					"$repeat" >>"$tmp"
			done
		done
	done
done
[ -n "${RAW:-}" ] && cp "$tmp" "$RAW"

python3 - "$tmp" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
cases = {}
for r in rows:
    who = "baseline" if r["bench"] == "codec_baseline" else "zfolio"
    c = cases.setdefault((r["image"], r["codec"], r["unit"]), {})
    c.setdefault(who, []).append(r)
print("| image | codec | unit | ratio zfolio | ratio baseline | comp MB/s zfolio | baseline | zfolio/baseline | decomp MB/s zfolio | baseline | zfolio/baseline |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
worst = 9.0
for (img, codec, unit), c in sorted(cases.items()):
    z, b = c["zfolio"], c["baseline"]
    zc = statistics.median(x["comp_mbps"] for x in z); bc = statistics.median(x["comp_mbps"] for x in b)
    zd = statistics.median(x["decomp_mbps"] for x in z); bd = statistics.median(x["decomp_mbps"] for x in b)
    worst = min(worst, zc / bc, zd / bd)
    print(f"| {img} | {codec} | {unit // 1024}k | {z[0]['ratio']:.4f} | {b[0]['ratio']:.4f} | "
          f"{zc:.0f} | {bc:.0f} | {zc / bc:.3f} | {zd:.0f} | {bd:.0f} | {zd / bd:.3f} |")
    if abs(z[0]["ratio"] - b[0]["ratio"]) > 1e-4:
        print(f"RATIO MISMATCH: {img} {codec} {unit}", file=sys.stderr)
        sys.exit(1)
print(f"\nworst zfolio/baseline throughput ratio: {worst:.3f}")
PY
