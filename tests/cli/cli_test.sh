#!/bin/sh
# Description: the zfolio command end to end: bench codec's outputs (table, JSON with the
# documented fields, CSV), its defaults, odd unit sizes and images, and the exit codes
# and messages for bad input. usage: cli_test.sh ZFOLIO_BINARY
set -u
zf=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
fail=0
pass=0

ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*" >&2; fail=$((fail + 1)); }

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
expect 0 'lzo +64k' -- "$zf" bench codec --repeat 1
[ "$(grep -Ec '^(lz4:1|zstd:1|deflate:1|lzo) +(4k|64k) ' "$tmp/out")" -eq 8 ] && ok ||
	bad "default run: expected 8 rows"

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

# Bad input: a clear message and exit code 2, never a crash.
expect 2 'unknown codec' -- "$zf" bench codec --codec brotli
expect 2 'bad level' -- "$zf" bench codec --codec zstd:99
expect 2 'power of two' -- "$zf" bench codec --unit 12k
expect 2 'power of two' -- "$zf" bench codec --unit 4m
expect 2 'repeat' -- "$zf" bench codec --repeat 0
expect 2 'No such file' -- "$zf" bench codec --image "$tmp/missing.bin"
head -c 5000 /dev/zero >"$tmp/odd.bin"
expect 2 'not a memory image' -- "$zf" bench codec --image "$tmp/odd.bin"
printf '\050\265\057\375garbage' >"$tmp/bad.zst"
expect 1 'corrupt' -- "$zf" bench codec --image "$tmp/bad.zst"
expect 2 'unknown benchmark' -- "$zf" bench nope
expect 2 'unknown command' -- "$zf" nope
expect 0 'usage: zfolio bench codec' -- "$zf" bench codec --help
expect 0 'capture' -- "$zf" --help
expect 0 'zfolio [0-9]+\.[0-9]+\.[0-9]+' -- "$zf" version

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
