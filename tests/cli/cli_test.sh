#!/bin/sh
# Description: the zfolio command end to end: bench codec's outputs (table, JSON with the
# documented fields, CSV), its defaults, odd unit sizes and images, bench zpool's phases
# and fields, bench store's rows and fields, bench region's and pageout's (zfolio backend)
# runs, the option table (every command's --help, one meaning per flag, lists where a
# sweep makes sense), and the exit codes and one-line messages for bad input.
# usage: cli_test.sh ZFOLIO_BINARY
set -u
zf=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
fail=0
pass=0
skipped=0

ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*" >&2; fail=$((fail + 1)); }
skip() { echo "SKIP: $*"; skipped=$((skipped + 1)); }

# The codecs of this build ("zfolio 0.1.0 (codecs: lz4 lz4hc zstd ...)"): each is an
# option (ZF_WITH_LZ4, ...), and a case that names one the build lacks is skipped.
# zstd is always there: the command is not built without it.
codecs=$("$zf" version | sed -n 's/.*(codecs: \(.*\))$/\1/p')
have() { case " $codecs " in *" $1 "*) ;; *) return 1 ;; esac; }
lacking() { for c in "$@"; do have "$c" || printf ' %s' "$c"; done; } # those it lacks
[ -n "$codecs" ] || { echo "FAIL: no codec list in '$zf version'" >&2; exit 1; }
if ! have lz4; then
	# The default codec of every command but bench codec: nearly every case needs it.
	echo "SKIP: codec lz4 is not in this build (it has: $codecs)"
	exit 77
fi

# expect CODE PATTERN -- command...: exit code and a pattern in stdout+stderr.
expect() {
	code=$1 pattern=$2
	shift 3
	"$@" >"$tmp/out" 2>&1
	got=$?
	if [ "$got" -ne "$code" ]; then
		bad "'$*' exited $got, expected $code"; sed 's/^/  | /' "$tmp/out" | head -20 >&2
	elif ! grep -Eq -- "$pattern" "$tmp/out"; then
		bad "'$*': no /$pattern/ in its output"; sed 's/^/  | /' "$tmp/out" | head -20 >&2
	else
		ok
	fi
}

# The default run: the embedded sample, the four default codecs, 4k and 64k.
missing=$(lacking deflate lzo)
if [ -z "$missing" ]; then
	expect 0 'lzo +64k' -- "$zf" bench codec --repeat 1
	[ "$(grep -Ec '^(lz4:1|zstd:1|deflate:1|lzo) +(4k|64k) ' "$tmp/out")" -eq 8 ] && ok ||
		bad "default run: expected 8 rows"
else
	skip "bench codec's default run (lz4,zstd:1,deflate:1,lzo): not in this build:$missing"
fi

# JSON: one object per line, with every documented field.
expect 0 '"bench":"codec"' -- "$zf" bench codec --repeat 1 --json --codec lz4,zstd:-3 --unit 4k,2m
[ "$(wc -l <"$tmp/out")" -eq 4 ] && ok || bad "json: expected 4 lines"
for field in bench image codec unit ratio same_filled_pages incompressible_pct comp_mbps \
	decomp_mbps; do
	[ "$(grep -c "\"$field\":" "$tmp/out")" -eq 4 ] && ok || bad "json: field $field missing"
done
if command -v python3 >/dev/null 2>&1; then
	python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$tmp/out" && ok ||
		bad "json: not valid JSON"
fi

# CSV: a header and one row per case.
expect 0 '^bench,image,codec,unit,' -- "$zf" bench codec --repeat 1 --csv --codec none --unit 16k
[ "$(wc -l <"$tmp/out")" -eq 2 ] && ok || bad "csv: expected 2 lines"
grep -q '^codec,sample,none,16384,.*,1\.0000,' "$tmp/out" && ok || bad "csv: none must give ratio 1"

# An image of its own: 3 pages (a tail shorter than the unit), one of them same-filled.
head -c 8192 /dev/urandom >"$tmp/img.bin"
head -c 4096 /dev/zero >>"$tmp/img.bin"
expect 0 '"same_filled_pages":1,' -- "$zf" bench codec --image "$tmp/img.bin" --json --codec lz4 --unit 4k --repeat 1
grep -q '"incompressible_pct":66.6' "$tmp/out" && ok || bad "2 random pages of 3 are incompressible"
expect 0 '"units":1,' -- "$zf" bench codec --image "$tmp/img.bin" --json --codec lz4 --unit 64k --repeat 1

# bench zpool on an image of its own: 16 text pages, 2 random pages (kept raw), 1 zero page.
yes 'zfolio bench zpool: a compressible line' | head -c 65536 >"$tmp/zp.bin"
head -c 8192 /dev/urandom >>"$tmp/zp.bin"
head -c 4096 /dev/zero >>"$tmp/zp.bin"
zpool_json() {
	"$zf" bench zpool --image "$tmp/zp.bin" --unit 4k,64k --seed 7 --json
}
expect 0 '"bench":"zpool"' -- zpool_json
[ "$(wc -l <"$tmp/out")" -eq 6 ] && ok || bad "zpool json: expected 6 lines (2 units x 3 phases)"
for phase in fill free compact; do
	[ "$(grep -c "\"phase\":\"$phase\"" "$tmp/out")" -eq 2 ] && ok ||
		bad "zpool json: phase $phase"
done
for field in bench image codec unit seed phase objects compr_data_size mem_used_total overhead \
	pages_compacted meta_bytes alloc_ops_per_s free_ops_per_s malloc_resident_bytes \
	mimalloc_resident_bytes; do
	[ "$(grep -c "\"$field\":" "$tmp/out")" -eq 6 ] && ok ||
		bad "zpool json: field $field missing"
done
grep -q '"unit":4096,.*"phase":"fill","objects":18,.*"raw_units":2,' "$tmp/out" && ok ||
	bad "zpool: 4k: 18 objects (one unit of 19 same-filled), 2 of them raw"
grep -q '"unit":4096,.*"phase":"compact","objects":9,' "$tmp/out" && ok ||
	bad "zpool: 4k: 9 objects left after freeing half"
grep -q '"unit":65536,.*"phase":"free","objects":1,' "$tmp/out" && ok ||
	bad "zpool: 64k: 1 object left of 2"
grep -q '"malloc_resident_bytes":null' "$tmp/out" && bad "zpool: no result from glibc malloc" || ok
if command -v python3 >/dev/null 2>&1; then
	python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$tmp/out" && ok ||
		bad "zpool json: not valid JSON"
fi
# The same seed frees the same objects.
grep -o '"compr_data_size":[0-9]*' "$tmp/out" >"$tmp/sizes1"
zpool_json >"$tmp/out" 2>&1
grep -o '"compr_data_size":[0-9]*' "$tmp/out" | cmp -s - "$tmp/sizes1" && ok ||
	bad "zpool: --seed 7 twice freed different objects"
# The table on the defaults (the sample, lz4, 4k): a row per phase, the round trip checked.
expect 0 'zpool/malloc' -- "$zf" bench zpool
[ "$(grep -Ec '^(fill|free|compact) +[0-9]+ ' "$tmp/out")" -eq 3 ] && ok ||
	bad "zpool table: expected 3 rows"
grep -q 'read back OK' "$tmp/out" && ok || bad "zpool table: no read-back line"
grep -Eq 'seed [0-9]+' "$tmp/out" && ok || bad "zpool table: the seed is not printed"
expect 2 'power of two' -- "$zf" bench zpool --unit 12k
expect 2 'unknown codec' -- "$zf" bench zpool --codec brotli
expect 2 'one codec' -- "$zf" bench zpool --codec lz4,zstd
expect 2 'seed' -- "$zf" bench zpool --seed -1
expect 2 'unexpected argument' -- "$zf" bench zpool extra
expect 2 'No such file' -- "$zf" bench zpool --image "$tmp/missing.bin"
expect 2 'unknown option' -- "$zf" bench zpool --nope
expect 0 'usage: zfolio bench zpool' -- "$zf" bench zpool --help
expect 0 'zpool' -- "$zf" bench --help

# bench store: JSON with the documented fields, a row per mode x folio x engines, every
# byte checked (a mismatch exits 1, also with puts in flight); speed-up fields only with
# engines.
expect 0 '"bench":"store"' -- "$zf" bench store --repeat 1 --gets 50 --layout split,unit:16k \
	--folio 64k,2m --engines 0,1 --inflight 3 --json
[ "$(wc -l <"$tmp/out")" -eq 8 ] && ok || bad "bench store json: expected 8 lines"
for field in bench image codec mode folio engines inflight put_mbps get_mbps ratio mem_used_total \
	get_p50_us get_p99_us get_busy_p50_us get_busy_p99_us bare_put_mbps bare_get_mbps \
	counters zswpout swpin_fallback_16k put_of_bare_passes get_of_bare_passes; do
	grep -q "\"$field\":" "$tmp/out" && ok || bad "bench store json: field $field missing"
done
[ "$(grep -Ec '"get_of_bare_passes":\[[0-9.]+\]' "$tmp/out")" -eq 8 ] && ok ||
	bad "bench store json: one get_of_bare per pass"
[ "$(grep -c '"ceiling_speedup":' "$tmp/out")" -eq 4 ] && ok || bad "ceiling only with engines"
[ "$(grep -c '"get_ceiling_speedup":' "$tmp/out")" -eq 4 ] && ok || bad "get ceiling only with engines"
expect 0 'unit:64k' -- "$zf" bench store --repeat 1 --gets 50
expect 2 'split or unit' -- "$zf" bench store --layout unit:4k
expect 2 'split or unit' -- "$zf" bench store --layout zram
expect 2 'unknown option' -- "$zf" bench store --mode split
expect 2 'engines' -- "$zf" bench store --engines 65
expect 2 'inflight' -- "$zf" bench store --inflight 0
expect 2 'inflight' -- "$zf" bench store --inflight 17
expect 2 'power of two' -- "$zf" bench store --folio 3k
expect 2 'smaller than one 2 MiB folio' -- "$zf" bench store --image "$tmp/img.bin"
expect 0 'usage: zfolio bench store' -- "$zf" bench store --help

# Bad input: a clear message and exit code 2, never a crash.
expect 2 'unknown codec' -- "$zf" bench codec --codec brotli
expect 2 'bad level' -- "$zf" bench codec --codec zstd:99
expect 2 'power of two' -- "$zf" bench codec --unit 12k
expect 2 'power of two' -- "$zf" bench codec --unit 4m
expect 2 'repeat' -- "$zf" bench codec --repeat 0
# (With --codec lz4: the default list may name a codec this build lacks.)
expect 2 'No such file' -- "$zf" bench codec --codec lz4 --image "$tmp/missing.bin"
head -c 5000 /dev/zero >"$tmp/odd.bin"
expect 2 'not a memory image' -- "$zf" bench codec --codec lz4 --image "$tmp/odd.bin"
printf '\050\265\057\375garbage' >"$tmp/bad.zst"
expect 1 'corrupt' -- "$zf" bench codec --codec lz4 --image "$tmp/bad.zst"
expect 2 'unknown benchmark' -- "$zf" bench nope
expect 2 'unknown command' -- "$zf" nope
expect 0 'usage: zfolio bench codec' -- "$zf" bench codec --help
expect 0 'capture' -- "$zf" --help
expect 0 'zfolio [0-9]+\.[0-9]+\.[0-9]+' -- "$zf" version

# bench region: rows and JSON fields of a short run, every byte checked (a mismatch exits 1).
# It needs userfaultfd: without it (not root) it exits 77 and only the bad-input checks run.
"$zf" bench region --size 8m --repeat 1 >"$tmp/out" 2>&1
got=$?
if [ "$got" -eq 77 ]; then
	echo "bench region: userfaultfd unavailable (exit 77), its runs skipped" >&2
	grep -q 'userfaultfd' "$tmp/out" && ok || bad "bench region: exit 77 without a reason"
elif [ "$got" -ne 0 ]; then
	bad "bench region --size 8m --repeat 1 exited $got"; sed 's/^/  | /' "$tmp/out" | head -20 >&2
else
	ok
	# The defaults: 4k and 64k units, no frames, no engines, thread and sigbus modes, whole
	# swap-in, no readahead.
	[ "$(grep -Ec '^sample +lz4:?[0-9]* +(4k|64k) +0 +(thread|sigbus) +0 +whole +[0-9.]+ ' \
		"$tmp/out")" -eq 4 ] && ok || bad "bench region table: expected 4 rows"
	grep -q 'fault p50' "$tmp/out" && ok || bad "bench region table: no header"
	expect 0 '"bench":"region"' -- "$zf" bench region --size 8m --repeat 1 --unit 16k \
		--mode thread,sigbus --readahead 0,4 --json
	[ "$(wc -l <"$tmp/out")" -eq 4 ] && ok || bad "bench region json: expected 4 lines"
	for field in bench image codec unit mode readahead swapin size repeat swapout_ms \
		swapin_ms swapin_mbps fault_p50_us fault_p99_us service_p50_us service_p99_us \
		pgmajfault faulted swap_ra swap_ra_hit ratio counters; do
		[ "$(grep -c "\"$field\":" "$tmp/out")" -eq 4 ] && ok ||
			bad "bench region json: field $field missing"
	done
	if command -v python3 >/dev/null 2>&1; then
		python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$tmp/out" &&
			ok || bad "bench region json: not valid JSON"
	fi
	# Without readahead, every first touch of the 512 units of 16 KiB faults. (In thread
	# mode the service thread counts a fault after its copy woke the program: a pass's
	# last fault may fall into the next pass's counts, 511 one time, 513 the other - seen
	# once in 30 runs each; accepted there.)
	grep -q '"mode":"sigbus","readahead":0,.*"touches":512,"pgmajfault":512,' "$tmp/out" &&
		ok || bad "bench region: sigbus: 512 faults expected without readahead"
	grep -q '"size":8388608,"repeat":1,' "$tmp/out" && ok || bad "bench region: size, repeat"
	grep -Eq '"mode":"thread","readahead":0,.*"touches":512,"pgmajfault":51[123],' "$tmp/out" &&
		ok || bad "bench region: thread: 512 faults expected without readahead"
	# Per-page swap-in: a fault per 4 KiB page; an image smaller than the region, tiled.
	expect 0 '"swapin":"per-page"' -- "$zf" bench region --image "$tmp/zp.bin" --size 2m \
		--repeat 1 --unit 64k --mode sigbus --swapin per-page --json
	grep -q '"touches":512,"pgmajfault":512,' "$tmp/out" && ok ||
		bad "bench region: per-page: a fault per page expected"
	grep -q '"image_size":77824,' "$tmp/out" && ok || bad "bench region: image_size"
fi
# Frames: a fault per 2 MiB frame, each placed as a huge page where the system has them.
expect 0 '"frame":2097152' -- "$zf" bench region --size 8m --repeat 1 --unit 64k --frame 2m \
	--engines 2 --mode sigbus --json
grep -q '"unit_name":"64k/2m"' "$tmp/out" && ok || bad "bench region --frame 2m: unit_name"
grep -q '"touches":4,"pgmajfault":4,' "$tmp/out" && ok ||
	bad "bench region --frame 2m: a fault per frame expected"
expect 2 'none or 2m' -- "$zf" bench region --frame 4m
expect 2 'none or 2m' -- "$zf" pageout --frame 1m
# bench fresh: a region's first touch against plain memory, every byte checked.
expect 0 'usage: zfolio bench fresh' -- "$zf" bench fresh --help
expect 0 'fresh' -- "$zf" bench --help
"$zf" bench fresh --size 4m --repeat 1 --json >"$tmp/out" 2>&1
got=$?
if [ "$got" -eq 77 ]; then
	grep -q 'userfaultfd' "$tmp/out" && ok || bad "bench fresh: exit 77 without a reason"
elif [ "$got" -ne 0 ]; then
	bad "bench fresh --size 4m --repeat 1 exited $got"; sed 's/^/  | /' "$tmp/out" | head -20 >&2
else
	[ "$(grep -c '"bench":"fresh"' "$tmp/out")" -eq 6 ] && ok ||
		bad "bench fresh json: expected 6 cases (plain 4k, plain thp, 4 regions)"
	grep -q '"case":"region/2m/sigbus".*"baseline":"plain/thp","write_vs_plain":' "$tmp/out" &&
		ok || bad "bench fresh json: a frames region compared with plain huge pages"
fi
expect 2 'repeat' -- "$zf" bench fresh --repeat 0
expect 2 'power of two' -- "$zf" bench region --unit 12k
expect 2 'thread or sigbus' -- "$zf" bench region --mode zram
expect 2 'whole or per-page' -- "$zf" bench region --swapin half
expect 2 'readahead' -- "$zf" bench region --readahead -1
expect 2 'size' -- "$zf" bench region --size 0
expect 2 'repeat' -- "$zf" bench region --repeat 0
expect 2 'unknown codec' -- "$zf" bench region --codec brotli
expect 2 'unexpected argument' -- "$zf" bench region extra
expect 2 'unknown option' -- "$zf" bench region --nope
expect 2 'unknown option' -- "$zf" bench region -a 4
expect 0 'usage: zfolio bench region' -- "$zf" bench region --help

# pageout, zfolio backend: every byte compared after every iteration (--verify); the runs,
# the side-by-side table, JSON fields; bad input. Without userfaultfd it exits 77.
"$zf" pageout --size 4m --repeat 2 --verify >"$tmp/out" 2>&1
got=$?
if [ "$got" -eq 77 ]; then
	echo "pageout: userfaultfd unavailable (exit 77), its runs skipped" >&2
	grep -q 'userfaultfd' "$tmp/out" && ok || bad "pageout: exit 77 without a reason"
elif [ "$got" -ne 0 ]; then
	bad "pageout --size 4m --repeat 2 --verify exited $got"
	sed 's/^/  | /' "$tmp/out" | head -20 >&2
else
	ok
	[ "$(grep -Ec '^zfolio, unit (4k|64k), lz4, ' "$tmp/out")" -eq 2 ] && ok ||
		bad "pageout: expected a 4k and a 64k run by default"
	grep -Eq '^lz4 +gain .*published 1\.63x / 1\.97x' "$tmp/out" && ok ||
		bad "pageout: no gain row beside the published one"
	expect 0 '"bench":"pageout"' -- "$zf" pageout --size 2m --repeat 1 --unit 16k \
		--codec lz4,zstd:1 --mode thread,sigbus --swapin whole,per-page --engines 1 --json
	[ "$(grep -c '"bench":"pageout"' "$tmp/out")" -eq 8 ] && ok ||
		bad "pageout json: expected 8 runs"
	for field in bench backend unit codec swapin_mode iterations swapout_ms_median \
		swapin_ms_median swapout_mbps swapin_mbps orig_bytes compr_bytes mem_used_bytes \
		meta_bytes staging_max_bytes faults fault_us service_us load_us place_us degraded \
		counters; do
		[ "$(grep '"bench":"pageout"' "$tmp/out" | grep -c "\"$field\":")" -eq 8 ] &&
			ok || bad "pageout json: field $field missing"
	done
	# The store's table and the region's state words at least.
	[ "$(grep -c '"meta_bytes":[1-9]' "$tmp/out")" -eq 8 ] && ok ||
		bad "pageout json: meta_bytes not above 0"
	# The comparisons: for each codec, 3 other labels against the first.
	[ "$(grep -c '"bench":"pageout-compare"' "$tmp/out")" -eq 6 ] && ok ||
		bad "pageout json: expected 6 comparisons"
	if command -v python3 >/dev/null 2>&1; then
		python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$tmp/out" &&
			ok || bad "pageout json: not valid JSON"
	fi
	# Every unit comes back each iteration: 128 units of 16k, a fault each; with per-page,
	# a fault per page. Everything was stored: orig_bytes is the size.
	grep -q '"swapin_mode":"whole","fault_mode":"sigbus",.*"orig_bytes":2097152,.*"faults":128,' \
		"$tmp/out" && ok || bad "pageout: whole: a fault per unit expected"
	grep -q '"swapin_mode":"per-page","fault_mode":"sigbus",.*"faults":512,' "$tmp/out" && ok ||
		bad "pageout: per-page: a fault per page expected"
	# Engines and readahead are lists too: a run each, told apart in the comparison.
	expect 0 '"a":"zfolio/e0/ra0","b":"zfolio/e1/ra0"' -- "$zf" pageout --size 2m --repeat 1 \
		--unit 16k --engines 0,1 --readahead 0,2 --json
	[ "$(grep -c '"bench":"pageout"' "$tmp/out")" -eq 4 ] && ok ||
		bad "pageout json: --engines 0,1 --readahead 0,2: expected 4 runs"
fi
expect 2 'zfolio or kernel' -- "$zf" pageout --backend zswap
expect 2 'repeat' -- "$zf" pageout --repeat 0
expect 2 'unknown option' -- "$zf" pageout --iterations 3
expect 2 'size' -- "$zf" pageout --size 1k
expect 2 'power of two' -- "$zf" pageout --unit 48k
expect 2 'neither' -- "$zf" pageout --codec brotli
expect 2 'whole or per-page' -- "$zf" pageout --swapin half
expect 2 'thread or sigbus' -- "$zf" pageout --mode poll
expect 2 'one image' -- "$zf" pageout --image a --image b
expect 2 'No such file' -- "$zf" pageout --image "$tmp/none.bin"
expect 2 'unexpected argument' -- "$zf" pageout extra
expect 0 'usage: zfolio pageout' -- "$zf" pageout --help

# capture: its operand and options go through the same parser (capture_test runs it).
expect 2 'missing PID' -- "$zf" capture
expect 2 'missing -o FILE' -- "$zf" capture 1
expect 2 'one PID only' -- "$zf" capture 1 2 -o "$tmp/x.bin"
expect 2 'max' -- "$zf" capture 1 -o "$tmp/x.bin" --max 1k
expect 2 'level' -- "$zf" capture 1 -o "$tmp/x.zst" --level 23
expect 2 'takes no value' -- "$zf" capture 1 -o "$tmp/x.bin" --stop=1
expect 0 'usage: zfolio capture PID -o FILE' -- "$zf" capture --help

# The option table: every command's --help lists -h and its options, each with a help
# line; a flag means one thing everywhere; a refusal is one line on stderr, exit 2.
for cmd in "bench codec" "bench zpool" "bench store" "bench region" pageout capture; do
	# shellcheck disable=SC2086
	expect 0 '^  -h, --help +this text' -- "$zf" $cmd --help
	grep -Eq '^  --json +print JSON' "$tmp/out" && ok || bad "$cmd --help: no --json line"
	grep -q -- '--iterations' "$tmp/out" && bad "$cmd --help: --iterations beside --repeat" || ok
done
for cmd in "bench codec" "bench store" "bench region" pageout; do
	# shellcheck disable=SC2086
	"$zf" $cmd --help | grep -Eq '^  --repeat N +timed passes' && ok || bad "$cmd: no --repeat"
done
for bad_input in "bench codec --unit 3k" "bench store --engines x" "bench region --mode poll" \
	"pageout --codec" "bench zpool --seed=" "capture 12 -o"; do
	# shellcheck disable=SC2086
	"$zf" $bad_input >"$tmp/out" 2>"$tmp/err"
	got=$?
	if [ "$got" -ne 2 ] || [ "$(wc -l <"$tmp/err")" -ne 1 ] || [ -s "$tmp/out" ]; then
		bad "'zfolio $bad_input': exit $got, $(wc -l <"$tmp/err") lines on stderr (want 2, 1)"
	else
		ok
	fi
done

echo "$pass passed, $fail failed, $skipped skipped"
[ "$fail" -eq 0 ]
