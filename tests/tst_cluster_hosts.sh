#!/usr/bin/env bash
# A cluster across hosts: a coordinator with one node of its own (a thread of
# its process, as in a teacher's window) on host A, and two `smolctl node`
# processes on hosts B and C. Each host is a network namespace with its own
# address, joined by a veth pair to a bridge in a namespace of its own; the
# bridge has no route out, and the test makes and removes all of it.
#
#   1. ddp and zero3 over A+B+C end with the parameters of the embedded run
#      (same strategy, 3 node threads over loopback) - which only works when
#      B and C are told an address of A's node they can reach (not 127.0.0.1).
#   2. kill -9 of B's node mid-run: the run re-forms with A and C and ends.
#   3. a wrong --advertise address: the epoch fails at once, and the error
#      names the address tried and the --advertise override.
#
# Needs root (network namespaces): otherwise exit 77, which ctest reports as
# "not run" with the reason, never as passed.
set -euo pipefail

smolctl=${1:?usage: tst_cluster_hosts.sh PATH/TO/smolctl}
# shellcheck source=netns_hosts.sh
source "$(dirname "$0")/netns_hosts.sh"

for strategy in ddp zero3; do
    "$smolctl" train --strategy "$strategy" --nodes 3 --steps 12 --seed 3 --json >"$work/ref-$strategy.json" \
        || fail "the embedded $strategy run failed"
    start_cluster "$strategy" "$strategy" 12
    finish_cluster "$strategy"
    want=$(json_field "$work/ref-$strategy.json" param_checksum)
    got=$(json_field "$work/$strategy.json" param_checksum)
    [[ -n $got ]] || fail "$strategy: no summary"
    close_enough "$got" "$want" 1e-4 || fail "$strategy across hosts: param_checksum $got, embedded $want"
    echo "ok: $strategy across hosts A+B+C: param_checksum $got (embedded $want)"
done

# kill -9 of B's node mid-run: the run re-forms without it.
start_cluster killed ddp 400 --global-batch 60
for _ in $(seq 1 600); do
    grep -q '"step":20,' "$work/killed.json" 2>/dev/null && break
    sleep 0.1
done
grep -q '"step":20,' "$work/killed.json" || { cat "$work/killed.err"; fail "kill -9: the run did not reach step 20"; }
kill -9 "$node_b"
wait "$node_b" 2>/dev/null || true
finish_cluster killed
reforms=$(json_field "$work/killed.json" reforms)
nodes=$(json_field "$work/killed.json" nodes)
[[ ${reforms:-0} -ge 1 && $nodes == 2 ]] || fail "kill -9: expected a re-form to 2 nodes, got reforms=$reforms nodes=$nodes"
grep -q "re-forming (attempt 1 of" "$work/killed.err" || fail "kill -9: the re-form was not said"
echo "ok: kill -9 of host B's node at step 20: re-formed ($reforms) and finished on $nodes nodes"

# A wrong --advertise: the epoch fails at once, naming the address and the override.
start_cluster badaddr ddp 5 --advertise 10.213.250.250
if wait "$coordinator"; then fail "a wrong --advertise address trained anyway"; fi
grep -q "10.213.250.250" "$work/badaddr.err" || { cat "$work/badaddr.err"; fail "the error does not name the address tried"; }
grep -q -- "--advertise" "$work/badaddr.err" || { cat "$work/badaddr.err"; fail "the error does not suggest --advertise"; }
echo "ok: a wrong --advertise fails the run with: $(grep -m1 -o 'connect to 10.213.250.250[^;]*' "$work/badaddr.err" || true)"
echo "1 passed, 0 failed"
