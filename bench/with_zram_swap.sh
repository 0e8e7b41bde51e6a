#!/bin/bash
# with_zram_swap.sh - runs a command with zram0 as the only swap (lz4, 512 MiB), then
# puts zram0 back as it was (swapoff, reset, its algorithm), also on an error or SIGINT.
# For bench/first_touch's swap-in rows. Needs root, zram0 unused and no swap active.
# usage: bench/with_zram_swap.sh COMMAND [ARG...]
set -eu
z=/sys/block/zram0
[ -e $z ] || { echo "no /sys/block/zram0 (modprobe zram)" >&2; exit 77; }
[ "$(cat $z/disksize)" = 0 ] || { echo "zram0 is in use" >&2; exit 77; }
[ "$(wc -l </proc/swaps)" -le 1 ] || { echo "a swap device is active already" >&2; exit 77; }
old=$(sed 's/.*\[\(.*\)\].*/\1/' $z/comp_algorithm)
restore() {
	swapoff /dev/zram0 2>/dev/null || true
	echo 1 >$z/reset
	echo "$old" >$z/comp_algorithm
}
trap restore EXIT
trap 'exit 130' INT TERM
echo lz4 >$z/comp_algorithm
echo 512M >$z/disksize
mkswap /dev/zram0 >/dev/null
swapon -p 32767 /dev/zram0
"$@"
