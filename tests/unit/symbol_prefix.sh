#!/bin/sh
# Description: only zf_ symbols may leave the shared library (libdeflate's
# symbol_prefix_test): internal functions are hidden, so a program cannot come to depend
# on them. usage: symbol_prefix.sh libzfolio.so
set -eu
bad=$(nm -D --defined-only "$1" | awk '$2 ~ /^[TDBRW]$/ && $3 !~ /^zf_/ { print $3 }')
if [ -n "$bad" ]; then
	echo "exported symbols without the zf_ prefix:" >&2
	echo "$bad" >&2
	exit 1
fi
echo "$(nm -D --defined-only "$1" | grep -c ' zf_') zf_ symbols exported, nothing else"
