#!/bin/sh
# run_test.sh - "zfolio run" and libzfolio-run.so end to end: real programs under a limit
# print what they print without zfolio, and the counters show their memory went through
# it. usage: run_test.sh ZFOLIO RUN_MAPS RUN_HEAP CASE [SOURCE_TREE]
#
#   usage    exit statuses: the program's, 128 + a signal, 127, 2 for bad usage
#   maps     run_maps (mappings: munmap, mremap, MAP_FIXED, files, madvise, threads,
#            more than the limit) passes plain and under zfolio, in both fault modes
#   heap     a glibc-malloc program over 4x the limit: the same checksum, resident peak
#            within limit + one reclaim batch, units evicted and read back; the same
#            without frames at 4 KiB units, with zstd, in SIGBUS mode, and through
#            LD_PRELOAD and ZFOLIO_* without the command
#   fork     run_fork (children of a heap mostly evicted check every byte, write their
#            own, a grandchild, an exec), a shell pipeline, python3's multiprocessing
#            with fork: the same output as without zfolio
#   python   Debian's python3 building objects over 4x the limit: the same digest
#   sqlite   sqlite3 with an in-memory database over 4x the limit: the same query
#            results and integrity_check
#   signals  a program with its own SIGBUS and SIGSEGV handlers (both modes: zfolio's
#            stays installed and chains to the program's), and sh -c then exec
#   redis    redis-server with a data set 4x the limit: DEBUG DIGEST as without zfolio;
#            BGSAVE with most of the heap evicted, the RDB loaded by a plain server with
#            the same digest; redis-benchmark SET/GET; kill -9 leaves nothing
#   make     make -j2 of this project's library sources (SOURCE_TREE) under half of the
#            run's peak without a limit: the same object files as a plain build
#   share    the share of run_heap's, python3's, sqlite3's and redis-server's anonymous
#            memory that lives in zfolio while they hold their data: at least 95% each
#   stat     zfolio stat on a run of two processes (table, --json, RUN and PID, a PID
#            not under zfolio, --watch until the run ends by kill -9); nothing is left
#
# Exits 0, 1 on a failure, 77 when zfolio cannot run here (no userfaultfd) or the
# program a case needs is not installed.
set -u
Z=$1 MAPS=$2 HEAP=$3 CASE=$4 SRC=${5:-}
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d)
HELD= # the stat case's programs, killed on any exit
trap '[ -n "$HELD" ] && pkill -KILL -f "^$HELD"; rm -rf "$T"' EXIT

fail() {
	echo "FAIL run_test $CASE: $*" >&2
	exit 1
}

"$Z" run -- true
rc=$?
[ $rc -eq 77 ] && { echo "SKIP: zfolio cannot run here"; exit 77; }
[ $rc -eq 0 ] || fail "zfolio run -- true: exit $rc"

# A field of the JSON summary in $1.
field() {
	sed -n "s/.*\"$2\":\([0-9]*\).*/\1/p" "$1"
}

# Runs "$@" under zfolio with --json $T/sum.json; fails unless it exits 0.
zrun() {
	"$Z" run --json "$T/sum.json" "$@" > "$T/out" 2> "$T/err" ||
		fail "zfolio run $*: exit $? ($(tail -3 "$T/err"))"
}

# The summary shows units evicted and read back, and a peak within limit + batch.
check_paged() {
	limit=$1
	peak=$(field "$T/sum.json" resident_max)
	out=$(field "$T/sum.json" swpout)
	in=$(field "$T/sum.json" swpin)
	[ "${out:-0}" -gt 0 ] && [ "${in:-0}" -gt 0 ] ||
		fail "$2: nothing paged (swpout ${out:-?}, swpin ${in:-?}): $(cat "$T/sum.json")"
	[ "${peak:-0}" -gt 0 ] && [ "$peak" -le $((limit + (2 << 20))) ] ||
		fail "$2: resident peak ${peak:-?} over the limit $limit + 2 MiB"
}

case $CASE in
usage)
	"$Z" run > /dev/null 2>&1
	[ $? -eq 2 ] || fail "no PROG: want exit 2"
	"$Z" run --limit 12q -- true > /dev/null 2>&1
	[ $? -eq 2 ] || fail "--limit 12q: want exit 2"
	"$Z" run --help | grep -q "PROG" || fail "--help says nothing of PROG"
	"$Z" run -- "$T/no-such-program" 2> "$T/err"
	[ $? -eq 127 ] || fail "a program that does not exist: want 127"
	grep -q "cannot run" "$T/err" || fail "no word on the program that does not exist"
	"$Z" run -- sh -c 'exit 3' 2> /dev/null
	[ $? -eq 3 ] || fail "the program's exit status 3 not passed on"
	"$Z" run sh -c 'kill -TERM $$' 2> /dev/null
	[ $? -eq 143 ] || fail "a program killed by SIGTERM: want 143"
	mkdir "$T/tmp"
	TMPDIR=$T/tmp "$Z" run --limit 8m --json "$T/s.json" -- "$HEAP" 16 > /dev/null \
		2> "$T/err" || fail "run_heap 16"
	grep -q "^zfolio: 1 process" "$T/err" || fail "no summary line: $(cat "$T/err")"
	grep -q '"command":"run","status":0' "$T/s.json" || fail "--json: $(cat "$T/s.json")"
	[ -z "$(ls -A "$T/tmp")" ] || fail "left behind in TMPDIR: $(ls -A "$T/tmp")"
	TMPDIR=$T/tmp "$Z" run -- sh -c 'kill -KILL $$' 2> /dev/null
	[ $? -eq 137 ] || fail "a program killed by SIGKILL: want 137"
	[ -z "$(ls -A "$T/tmp")" ] || fail "left behind after kill -9: $(ls -A "$T/tmp")"
	# A setting the runtime does not know: said so, ignored, the program runs as ever.
	lib=$(dirname "$Z")/src/libzfolio-run.so
	[ -f "$lib" ] || lib=$(dirname "$Z")/../lib/libzfolio-run.so
	got=$(LD_PRELOAD=$lib ZFOLIO_MODE=fast ZFOLIO_LIMIT=12q "$HEAP" 16 2> "$T/err")
	[ "$got" = "$("$HEAP" 16)" ] || fail "bad ZFOLIO_MODE: checksum $got"
	grep -q "ZFOLIO_MODE=fast" "$T/err" && grep -q "ZFOLIO_LIMIT=12q" "$T/err" ||
		fail "bad settings not reported: $(cat "$T/err")"
	;;
maps)
	"$MAPS" > "$T/plain" 2>&1 || fail "run_maps without zfolio: $(cat "$T/plain")"
	for mode in thread sigbus; do
		zrun --limit 32m --mode $mode -- "$MAPS"
		grep -q "^ok   pageout" "$T/out" || fail "$mode: run_maps: $(cat "$T/out" "$T/err")"
		check_paged $((32 << 20)) "run_maps $mode"
	done
	;;
heap)
	want=$("$HEAP" 256)
	for opts in "" "--frame none --unit 4k" "--codec zstd:1" "--mode sigbus"; do
		# shellcheck disable=SC2086 # the options are words
		zrun --limit 64m $opts -- "$HEAP" 256
		[ "$(cat "$T/out")" = "$want" ] ||
			fail "run_heap [$opts]: checksum $(cat "$T/out"), want $want"
		check_paged $((64 << 20)) "run_heap [$opts]"
	done
	lib=$(dirname "$Z")/src/libzfolio-run.so
	[ -f "$lib" ] || lib=$(dirname "$Z")/../lib/libzfolio-run.so
	got=$(LD_PRELOAD=$lib ZFOLIO_LIMIT=32m ZFOLIO_STATS=$T/st "$HEAP" 128)
	[ "$got" = "$("$HEAP" 128)" ] || fail "LD_PRELOAD: checksum $got"
	grep -q '"swpout":[1-9]' "$T"/st.* || fail "LD_PRELOAD: no counters, or nothing paged"
	;;
fork)
	FORK=$(dirname "$HEAP")/run_fork
	zrun --limit 32m -- "$FORK" 128
	[ "$(cat "$T/out")" = ok ] || fail "run_fork: $(cat "$T/out" "$T/err")"
	check_paged $((32 << 20)) "run_fork"
	zrun --limit 16m -- sh -c "'$HEAP' 64 | tr 0-9 a-j | cat; '$HEAP' 32"
	want=$("$HEAP" 64 | tr 0-9 a-j; "$HEAP" 32)
	[ "$(cat "$T/out")" = "$want" ] || fail "a shell pipeline: $(cat "$T/out")"
	py=/usr/bin/python3
	[ -x $py ] || exit 0
	cat > "$T/mp.py" << 'EOF'
import hashlib, multiprocessing as mp
mp.set_start_method("fork")
data = [("item-%d-" % i) * 30 for i in range(300000)]
def digest(lo, hi):
    h = hashlib.sha256()
    for s in data[lo:hi]:
        h.update(s.encode())
    return h.hexdigest()
def work(k):
    for i in range(k, len(data), 7):
        data[i] = data[i].upper()
    return digest(k * 1000, k * 1000 + 50000)
with mp.Pool(2, maxtasksperchild=1) as p:
    res = p.map(work, range(4))
print(res, digest(0, len(data)))
EOF
	want=$($py "$T/mp.py")
	zrun --limit 32m -- $py "$T/mp.py"
	[ "$(cat "$T/out")" = "$want" ] || fail "multiprocessing: $(cat "$T/out"), want $want"
	;;
python)
	py=/usr/bin/python3
	[ -x $py ] || { echo "SKIP: no $py"; exit 77; }
	want=$($py "$HERE/objs.py")
	zrun --limit 64m -- $py "$HERE/objs.py"
	[ "$(cat "$T/out")" = "$want" ] || fail "python3: $(cat "$T/out"), want $want"
	check_paged $((64 << 20)) "python3"
	;;
sqlite)
	command -v sqlite3 > /dev/null || { echo "SKIP: no sqlite3"; exit 77; }
	cat > "$T/db.sql" << 'EOF'
PRAGMA cache_size = -400000;
CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT, v TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 300000)
INSERT INTO t SELECT x, 'key-' || (x * 7919 % 300000), printf('%.*c', 200 + x % 300, 'v') || x FROM c;
CREATE INDEX tk ON t(k);
DELETE FROM t WHERE id % 5 = 0;
SELECT count(*), sum(length(v)), max(k) FROM t;
SELECT k, length(v) FROM t WHERE k LIKE 'key-1234%' ORDER BY k LIMIT 5;
PRAGMA integrity_check;
EOF
	want=$(sqlite3 :memory: < "$T/db.sql")
	zrun --limit 32m -- sqlite3 :memory: < "$T/db.sql"
	[ "$(cat "$T/out")" = "$want" ] || fail "sqlite3: $(cat "$T/out"), want $want"
	check_paged $((32 << 20)) "sqlite3"
	;;
signals)
	# Its own SIGBUS and SIGSEGV handlers, and an exec chain (sh -c, then the program).
	SIGS=$(dirname "$HEAP")/run_signals
	want=$("$SIGS" 64)
	case $want in ok*) ;; *) fail "run_signals without zfolio: $want" ;; esac
	for mode in sigbus thread; do
		zrun --limit 16m --mode $mode -- "$SIGS" 64
		[ "$(cat "$T/out")" = "$want" ] || fail "$mode: $(cat "$T/out" "$T/err")"
		check_paged $((16 << 20)) "run_signals $mode"
		zrun --limit 16m --mode $mode -- sh -c "'$SIGS' 64 && exec '$SIGS' 32"
		[ "$(cat "$T/out")" = "$want
$("$SIGS" 32)" ] || fail "$mode: sh -c, exec: $(cat "$T/out" "$T/err")"
	done
	;;
redis)
	# Debian's redis-server (jemalloc) on loopback ports of its own: a data set 4x the
	# limit, its digest; BGSAVE from an evicted heap, loaded by a plain server; the
	# benchmark; kill -9. 4 KiB units without frames: DEBUG DIGEST walks the keys in hash
	# order, and with 2 MiB frames each miss reads a frame back (docs/run.md, "Redis").
	for c in redis-server redis-cli redis-benchmark; do
		command -v $c > /dev/null || { echo "SKIP: no $c"; exit 77; }
	done
	keys=225000 # 200-byte values: 64 MiB of used_memory
	port=$((20000 + $$ % 20000))
	cli() { redis-cli -p "$@"; }
	up() {
		for _ in $(seq 100); do
			[ "$(cli "$1" ping 2> /dev/null)" = PONG ] && return 0
			sleep 0.1
		done
		fail "redis-server on $1 did not start: $(cat "$T"/log.* 2> /dev/null | tail -5)"
	}
	server() { # PORT [zfolio run options --]: a server with its data in $T
		p=$1
		shift
		"$@" redis-server --port "$p" --bind 127.0.0.1 --save "" --appendonly no \
			--dir "$T" --dbfilename "dump.$p.rdb" --enable-debug-command yes \
			> "$T/log.$p" 2>&1 &
		up "$p"
	}
	server $port
	cli $port debug populate $keys key 200 > /dev/null
	want=$(cli $port debug digest)
	cli $port shutdown nosave > /dev/null 2>&1
	wait
	zp=$((port + 1))
	mkdir "$T/tmp"
	server $zp env TMPDIR="$T/tmp" "$Z" run --json "$T/sum.json" --limit 16m --frame none \
		--unit 4k --
	zpid=$!
	cli $zp debug populate $keys key 200 > /dev/null
	got=$(cli $zp debug digest)
	[ "$got" = "$want" ] || fail "DEBUG DIGEST $got under zfolio, $want without"
	stat=$("$Z" stat --json $zpid)
	[ "$(echo "$stat" | sed -n 's/.*"swpout_units":\([0-9]*\).*/\1/p')" -gt 0 ] ||
		fail "nothing swapped out: $stat"
	# BGSAVE with most of the heap evicted: the child writes it all from its copy.
	cli $zp bgsave > /dev/null
	for _ in $(seq 600); do
		cli $zp info persistence | grep -q "rdb_bgsave_in_progress:0" && break
		sleep 0.1
	done
	cli $zp info persistence | grep -q "rdb_last_bgsave_status:ok" ||
		fail "BGSAVE: $(cli $zp info persistence | grep bgsave)"
	lp=$((port + 2))
	cp "$T/dump.$zp.rdb" "$T/dump.$lp.rdb"
	server $lp
	got=$(cli $lp debug digest)
	[ "$got" = "$want" ] || fail "the RDB loaded by a plain server: digest $got, want $want"
	cli $lp shutdown nosave > /dev/null 2>&1
	# The benchmark: SET and GET of compressible 1000-byte values on 100000 keys.
	redis-benchmark -p $zp -t set,get -n 20000 -r 100000 -d 1000 -q > "$T/bench" 2>&1 ||
		fail "redis-benchmark: $(cat "$T/bench")"
	[ "$(grep -c "requests per second" "$T/bench")" -eq 2 ] ||
		fail "redis-benchmark: $(cat "$T/bench")"
	cli $zp dbsize | grep -q "^[1-9]" || fail "no keys after the benchmark"
	# kill -9 of the server: zfolio run ends with 137, and nothing is left behind.
	pkill -KILL -f "redis-server 127.0.0.1:$zp"
	wait $zpid
	rc=$?
	[ $rc -eq 137 ] || fail "zfolio run after kill -9 of the server: exit $rc"
	[ -z "$(ls -A "$T/tmp")" ] || fail "left behind in TMPDIR: $(ls -A "$T/tmp")"
	"$Z" stat $zpid > /dev/null 2>&1
	[ $? -eq 1 ] || fail "the run is still found after it ended"
	# No counters at exit after kill -9: the run's own (the group's) say it paged.
	peak=$(field "$T/sum.json" resident_max)
	[ "$(field "$T/sum.json" reclaimed_bytes)" -gt 0 ] && [ "$peak" -le $((18 << 20)) ] ||
		fail "redis-server: $(cat "$T/sum.json")"
	;;
make)
	# make -j2 of a C code base (this project's library sources) under half the run's
	# peak without a limit: the same object files as a plain build. The compilers are
	# exec'd by gcc, which make forks and execs: every process joins the run.
	[ -n "${SRC:-}" ] && [ -d "$SRC/src/region" ] || fail "no source tree (5th argument)"
	command -v make > /dev/null && command -v cc > /dev/null ||
		{ echo "SKIP: no make or cc"; exit 77; }
	mkdir "$T/plain" "$T/free" "$T/limited"
	objs() { (cd "$1" && sha256sum ./*.o); }
	make -s -j2 -C "$T/plain" -f "$HERE/library.mk" SRC="$SRC" > "$T/out" 2>&1 ||
		fail "plain make: $(cat "$T/out")"
	zrun -- make -s -j2 -C "$T/free" -f "$HERE/library.mk" SRC="$SRC"
	[ "$(objs "$T/free")" = "$(objs "$T/plain")" ] || fail "make under zfolio: other objects"
	peak=$(field "$T/sum.json" resident_max)
	limit=$((peak / 2 / 1048576 * 1048576))
	[ $limit -ge $((8 << 20)) ] || fail "the build's peak is $peak: too small to halve"
	zrun --limit $limit -- make -s -j2 -C "$T/limited" -f "$HERE/library.mk" SRC="$SRC"
	[ "$(objs "$T/limited")" = "$(objs "$T/plain")" ] ||
		fail "make under a limit of $limit: other objects"
	check_paged $limit "make -j2 (peak $peak without a limit)"
	[ "$(field "$T/sum.json" processes)" -gt 20 ] || fail "few processes: $(cat "$T/sum.json")"
	;;
share)
	# Which share of each program's anonymous memory is in zfolio, while it holds its
	# data, without a limit: /proc/PID/smaps, Anonymous in the region (the arena at
	# 8 TiB, 0x80000000000-0x803ffffffff) against Anonymous in all mappings (zfolio's own
	# bookkeeping counts as not in zfolio). At least 95% each.
	share() { # NAME PID: prints the share, fails under 95%
		awk -v name="$1" '
			/^[0-9a-f]+-[0-9a-f]+ / { split($1, a, "-"); in_arena = length(a[1]) == 11 && a[1] ~ /^80[0-3]/ }
			/^Anonymous:/ { all += $2; if (in_arena) arena += $2 }
			END {
				printf "share %s: %d of %d KiB anonymous in zfolio (%.1f%%)\n", name, arena, all, all ? 100 * arena / all : 0
				exit !(all > 0 && arena >= 0.95 * all)
			}' "/proc/$2/smaps" || fail "$1: under 95% of its anonymous memory in zfolio"
	}
	wait_for() { # FILE TEXT: until FILE holds TEXT
		for _ in $(seq 300); do
			grep -q "$2" "$1" 2> /dev/null && return 0
			sleep 0.1
		done
		fail "waited for '$2' in $1: $(cat "$1" "$T/err" 2> /dev/null | tail -5)"
	}
	# glibc malloc: run_heap holding 256 MiB.
	HELD="$HEAP 256 hold $$"
	"$Z" run -- $HELD > "$T/h.out" 2> "$T/err" &
	wait_for "$T/h.out" held
	share run_heap "$(pgrep -f "^$HELD")"
	pkill -KILL -f "^$HELD"
	wait
	# python3 (pymalloc and malloc): objects, then it waits for its stdin to close. Its
	# anonymous memory under zfolio is also held against the plain run's: pymalloc's
	# 1 MiB arenas once took a 2 MiB frame each, and python3 twice the memory.
	py=/usr/bin/python3
	if [ -x $py ]; then
		cat > "$T/hold.py" << 'EOF'
import sys
d = {i: ("value-%d-" % i) * 20 for i in range(600000)}
objs = [list(range(i, i + 50)) for i in range(0, 600000, 10)]
print("ready", flush=True)
sys.stdin.read()
print(len(d), len(objs))
EOF
		for how in plain zfolio; do
			mkfifo "$T/in"
			if [ $how = plain ]; then
				$py "$T/hold.py" < "$T/in" > "$T/p.out" 2> "$T/err" &
			else
				"$Z" run -- $py "$T/hold.py" < "$T/in" > "$T/p.out" 2> "$T/err" &
			fi
			exec 7> "$T/in"
			wait_for "$T/p.out" ready
			pid=$(pgrep -f "^$py $T/hold.py")
			anon=$(awk '/^Anonymous:/ { all += $2 } END { print all }' "/proc/$pid/smaps")
			if [ $how = plain ]; then
				plain_anon=$anon
			else
				share python3 "$pid"
				echo "python3: $anon KiB anonymous under zfolio, $plain_anon KiB plain"
				[ "$anon" -le $((plain_anon * 115 / 100)) ] ||
					fail "python3 takes $anon KiB of anonymous memory under zfolio, $plain_anon KiB plain"
			fi
			exec 7>&-
			wait
			grep -q "^600000 60000" "$T/p.out" || fail "python3 ($how): $(cat "$T/p.out" "$T/err")"
			rm "$T/in"
		done
	fi
	# sqlite3: an in-memory database of about 150 MiB, then it waits for more input.
	if command -v sqlite3 > /dev/null; then
		mkfifo "$T/in"
		"$Z" run -- sqlite3 :memory: < "$T/in" > "$T/s.out" 2> "$T/err" &
		exec 7> "$T/in"
		cat >&7 << 'EOF'
PRAGMA cache_size = -400000;
CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 400000)
INSERT INTO t SELECT x, printf('%.*c', 300, 'v') || x FROM c;
SELECT 'ready';
EOF
		wait_for "$T/s.out" ready
		share sqlite3 "$(pgrep -f "^sqlite3 :memory:" | tail -1)"
		exec 7>&-
		wait
	fi
	# redis-server (jemalloc): 64 MiB of keys.
	if command -v redis-server > /dev/null && command -v redis-cli > /dev/null; then
		port=$((20000 + $$ % 20000 + 3))
		"$Z" run -- redis-server --port $port --bind 127.0.0.1 --save "" \
			--appendonly no --dir "$T" --enable-debug-command yes > "$T/r.out" 2>&1 &
		for _ in $(seq 100); do
			[ "$(redis-cli -p $port ping 2> /dev/null)" = PONG ] && break
			sleep 0.1
		done
		redis-cli -p $port debug populate 225000 key 200 > /dev/null ||
			fail "redis: $(tail -5 "$T/r.out")"
		share redis-server "$(pgrep -f "redis-server 127.0.0.1:$port")"
		redis-cli -p $port shutdown nosave > /dev/null 2>&1
		wait
	fi
	;;
stat)
	# A run of two processes holding their memory until killed (this shell's pid: ours).
	HELD="$HEAP 48 hold $$"
	"$Z" run --limit 16m -- sh -c "$HELD & $HELD; wait" \
		> "$T/out" 2> "$T/err" &
	zpid=$!
	for _ in $(seq 100); do
		[ "$(grep -c "^held" "$T/out")" -eq 2 ] && break
		sleep 0.1
	done
	[ "$(grep -c "^held" "$T/out")" -eq 2 ] || fail "the run did not start: $(cat "$T/err")"
	"$Z" stat > "$T/st" || fail "zfolio stat: exit $?"
	grep -q "^run $zpid (.*): limit 16.0 MiB" "$T/st" || fail "no run line: $(cat "$T/st")"
	for pid in $(pgrep -f "^$HELD"); do
		grep -q "^ *$pid " "$T/st" || fail "process $pid not shown: $(cat "$T/st")"
	done
	"$Z" stat $zpid --json > "$T/sj" || fail "zfolio stat RUN --json: exit $?"
	[ "$(field "$T/sj" run)" = $zpid ] && [ "$(field "$T/sj" members)" -ge 3 ] ||
		fail "--json: $(cat "$T/sj")"
	res=$(field "$T/sj" resident_bytes | head -1)
	[ "$res" -le $((18 << 20)) ] || fail "the run holds $res over 16 MiB + 2"
	grep -q '"swpout_units":[1-9]' "$T/sj" || fail "--json: nothing swapped out: $(cat "$T/sj")"
	pid=$(pgrep -f "^$HELD" | head -1)
	"$Z" stat "$pid" > "$T/st1" || fail "zfolio stat PID: exit $?"
	[ "$(grep -c "^ *$pid " "$T/st1")" -eq 1 ] && [ "$(wc -l < "$T/st1")" -eq 3 ] ||
		fail "zfolio stat $pid: $(cat "$T/st1")"
	"$Z" stat $$ 2> "$T/e1"
	[ $? -eq 1 ] && grep -q "not running under zfolio" "$T/e1" || fail "a PID not under zfolio"
	"$Z" stat 2147483647 2> /dev/null
	[ $? -eq 1 ] || fail "a PID that does not exist: want 1"
	"$Z" stat x 2> /dev/null
	[ $? -eq 2 ] || fail "stat x: want 2"
	# --watch: again every second, and exit 0 when the run ends (kill -9 of its program).
	"$Z" stat --watch 1 --json $zpid > "$T/w" &
	wpid=$!
	sleep 1.5
	pkill -KILL -f "^$HELD"
	wait $zpid
	rc=$?
	[ $rc -eq 137 ] || [ $rc -eq 0 ] || fail "zfolio run: exit $rc"
	wait $wpid || fail "zfolio stat --watch: exit $? when the run ended"
	[ "$(grep -c '^{"run"' "$T/w")" -ge 2 ] || fail "--watch: $(cat "$T/w")"
	"$Z" stat $zpid > /dev/null 2>&1
	[ $? -eq 1 ] || fail "the run is still found after it ended"
	;;
*)
	fail "no case $CASE"
	;;
esac
echo "PASS run_test $CASE"
