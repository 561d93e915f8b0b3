#!/usr/bin/env bash
# test/cluster itself: start and stop twice in a row in one folder, two
# clusters at once in two folders, a second start in a running folder is
# refused, and stop leaves no process behind; a cluster whose owner dies is
# stopped by its watchdog.
set -euo pipefail
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
on_exit '"$root/test/cluster/stop" "$work/a" >/dev/null 2>&1; "$root/test/cluster/stop" "$work/b" >/dev/null 2>&1'

left() { pgrep -f -- "$1" | wc -l; }
ready() { curl -sf --cacert "$1/pki/ca.crt" -H "Authorization: Bearer $(cat "$1/tokens/admin")" "$(cat "$1/server")/readyz" >/dev/null && echo yes || echo no; }

for round in 1 2; do
  start=$(date +%s%N)
  "$root/test/cluster/start" "$work/a"
  echo "start took $(( ($(date +%s%N) - start) / 1000000 )) ms"
  check "round $round: ready" yes "$(ready "$work/a")"
  "$root/test/cluster/stop" "$work/a"
  check "round $round: nothing left after stop" 0 "$(left "$work/a")"
done

"$root/test/cluster/start" "$work/a" &
"$root/test/cluster/start" "$work/b"
wait
check "two at once: a ready" yes "$(ready "$work/a")"
check "two at once: b ready" yes "$(ready "$work/b")"
check "two at once: different servers" true "$([[ "$(cat "$work/a/server")" != "$(cat "$work/b/server")" ]] && echo true || echo false)"
check "a second start in a running folder is refused" 1 "$("$root/test/cluster/start" "$work/a" >/dev/null 2>&1; echo $?)"
"$root/test/cluster/stop" "$work/a"
"$root/test/cluster/stop" "$work/b"
check "nothing left of a or b" 0 "$(left "$work/[ab]")"

sleep 600 &
owner=$!
"$root/test/cluster/start" --owner-pid "$owner" "$work/a"
kill "$owner"
for _ in $(seq 100); do
  [[ "$(left "$work/a")" == 0 ]] && break
  sleep 0.1
done
check "the watchdog stops a cluster whose owner died" 0 "$(left "$work/a")"

finish
