#!/usr/bin/env bash
# A lock client written from the Redis SETNX page alone, independent of nxlock's code:
# SETNX; on 0 GET; if expired GETSET and own it only if the old value was expired;
# check the timeout before DEL. It runs COMMAND as each critical section.
# test_lock.py contends with nxlock through it, and bench/run uses it as the
# contention baseline (the page's lock hand-written with redis-cli, polling every 0.1 s).
#
# usage: setnx_page_client.sh PORT KEY TTL SECTIONS COMMAND [ARGS...]
set -u
port=$1 key=$2 ttl=$3 sections=$4
shift 4
r() { redis-cli -p "$port" "$@"; }

acquire() {
  while :; do
    local now value current old
    now=$(date +%s)
    value=$((now + ttl + 1))
    if [[ $(r SETNX "$key" "$value") == 1 ]]; then
      echo "$value"; return
    fi
    current=$(r GET "$key")
    if [[ -n $current && $current -lt $now ]]; then
      old=$(r GETSET "$key" "$value")
      if [[ -z $old || $old -lt $now ]]; then
        echo "$value"; return
      fi
    fi
    sleep 0.1
  done
}

for ((i = 0; i < sections; i++)); do
  value=$(acquire)
  "$@"
  # "Check the timeout didn't expire before unlocking the key with DEL."
  if (($(date +%s) <= value)); then
    r DEL "$key" >/dev/null
  fi
done
