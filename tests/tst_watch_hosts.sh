#!/usr/bin/env bash
# The students' view across hosts (network namespaces, as
# tst_cluster_hosts.sh): a coordinator with two nodes of its own on host A,
# a live `smolctl watch` on B with the watch token, a viewer on C that stops
# reading.
#
#   1. the run ends with the parameter checksum of the same run without
#      viewers; B printed every step and exits 0; C was dropped with a line.
#   2. the watch token cannot join as a node (refused with a line, exit != 0).
#   3. a lesson run on A (`smolctl lesson --check --listen`): the answers two
#      viewers send from B and C reach the teacher's lesson runner, which
#      prints them with their values.
#
# Needs root (network namespaces): otherwise exit 77, which ctest reports as
# "not run" with the reason, never as passed.
set -euo pipefail

smolctl=${1:?usage: tst_watch_hosts.sh PATH/TO/smolctl}
# shellcheck source=netns_hosts.sh
source "$(dirname "$0")/netns_hosts.sh"
addr_c="${addr_a%.1}.3"

# A slowed run (about 18 s): the stalled viewer has time to back up and be dropped.
steps=120
common=(--strategy ddp --nodes 2 --steps "$steps" --seed 3 --global-batch 60 --slowdown 0:70 --slowdown 1:70)
"$smolctl" train "${common[@]}" --json >"$work/ref.json" || fail "the run without viewers failed"

# 1. A: the coordinator and its two nodes, waiting for both viewers.
port=$((port + 1))
ip netns exec "${tag}a" timeout 300 "$smolctl" train --listen "$port" --token t --watch-token w \
    --local-nodes 2 --viewers 2 --wait-timeout 60 "${common[@]}" --json \
    >"$work/run.json" 2>"$work/run.err" </dev/null &
coordinator=$!
pids+=("$coordinator")
wait_listening "$work/run.err"
ip netns exec "${tag}b" timeout 300 "$smolctl" watch "$addr_a:$port" --token w --name live \
    >"$work/live.out" 2>"$work/live.err" </dev/null &
live=$!
pids+=("$live")
ip netns exec "${tag}c" timeout 300 "$smolctl" watch "$addr_a:$port" --token t --name stalled --stall \
    >"$work/stalled.out" 2>&1 </dev/null &
stalled=$!
pids+=("$stalled")

wait "$coordinator" || { cat "$work/run.err"; fail "the watched run failed"; }
want=$(json_field "$work/ref.json" param_checksum)
got=$(json_field "$work/run.json" param_checksum)
[[ -n $got ]] || fail "the watched run printed no summary"
close_enough "$got" "$want" 1e-4 || fail "watched run: param_checksum $got, without viewers $want"
echo "ok: the watched run ends with param_checksum $got (without viewers $want)"

if ! wait "$live"; then
    cat "$work/live.out" "$work/live.err"
    fail "the live viewer did not exit 0"
fi
seen=$(grep -c '^step [0-9]*: loss' "$work/live.out" || true)
[[ $seen -eq $steps ]] || { cat "$work/live.out"; fail "the live viewer saw $seen of $steps steps"; }
grep -q '^run ended: ddp on 2 node(s), 120 steps' "$work/live.out" || { cat "$work/live.out"; fail "no end line"; }
echo "ok: the live viewer on B printed all $seen steps and exited 0: $(grep '^received' "$work/live.out")"

grep -q "viewer [0-9]* 'stalled' ($addr_c) dropped" "$work/run.err" \
    || { cat "$work/run.err"; fail "the stalled viewer on C was not dropped with a line"; }
echo "ok: C was dropped: $(grep -o "viewer [0-9]* 'stalled' ($addr_c) dropped: [^(]*" "$work/run.err" | head -1)"
kill -9 "$stalled" 2>/dev/null || true
wait "$stalled" 2>/dev/null || true

# 2. The watch token may watch, never join as a node (the run, slowed to
# last seconds, is still going when the node knocks).
port=$((port + 1))
ip netns exec "${tag}a" timeout 120 "$smolctl" train --listen "$port" --token t --watch-token w \
    --local-nodes 1 --nodes 1 --strategy single --steps 40 --slowdown 0:50 --wait-timeout 20 --json \
    >"$work/tok.json" 2>"$work/tok.err" </dev/null &
coordinator=$!
pids+=("$coordinator")
wait_listening "$work/tok.err"
if ip netns exec "${tag}b" timeout 30 "$smolctl" node --join "$addr_a:$port" --token w --name sneaky \
    >"$work/sneaky.log" 2>&1 </dev/null; then
    fail "a node with the watch token joined"
fi
grep -q "refused this node" "$work/sneaky.log" || { cat "$work/sneaky.log"; fail "the node was not told why"; }
wait "$coordinator" || { cat "$work/tok.err"; fail "the run beside the refused node failed"; }
grep -q "may watch the run, not join it as a node" "$work/tok.err" || { cat "$work/tok.err"; fail "no refusal line"; }
echo "ok: a node with the watch token is refused: $(grep -m1 -o 'refused this node: .*' "$work/sneaky.log")"

# 3. The class's predictions reach the teacher's lesson runner: the
# stragglers lesson on A asks "samples per second" at its first step (index
# 0); alice answers 5000 from B (watch token), bob 9000 from C (run token).
# Both answer the later steps too, so no step waits out --class-wait.
port=$((port + 1))
ip netns exec "${tag}a" timeout 300 "$smolctl" lesson stragglers --check --listen "$port" --token t \
    --watch-token w --class-wait 60 --class-size 2 >"$work/lesson.out" 2>"$work/lesson.err" </dev/null &
teacher=$!
pids+=("$teacher")
wait_listening "$work/lesson.err"
ip netns exec "${tag}b" timeout 300 "$smolctl" watch "$addr_a:$port" --token w --name alice --runs 0 \
    --predict 0=5000 --predict 1=50 --predict 2=2 >"$work/alice.out" 2>&1 </dev/null &
alice=$!
pids+=("$alice")
ip netns exec "${tag}c" timeout 300 "$smolctl" watch "$addr_a:$port" --token t --name bob --runs 0 \
    --predict 0=9000 --predict 1=60 --predict 2=3 >"$work/bob.out" 2>&1 </dev/null &
bob=$!
pids+=("$bob")
wait "$teacher" || { cat "$work/lesson.out" "$work/lesson.err"; fail "the lesson with a class failed"; }
line=$(grep "^class: step 1 " "$work/lesson.out" || true)
[[ $line == *"2 answers"* && $line == *"alice 5"* && $line == *"bob 9"* ]] \
    || { cat "$work/lesson.out" "$work/alice.out" "$work/bob.out"; fail "the class's answers did not reach the lesson: '$line'"; }
grep -q "predicted 5000 for lesson step 0" "$work/alice.out" || { cat "$work/alice.out"; fail "alice did not answer"; }
echo "ok: two viewers' predictions reached the teacher's lesson runner: $line"
wait "$alice" 2>/dev/null || true
wait "$bob" 2>/dev/null || true

echo "1 passed, 0 failed"
