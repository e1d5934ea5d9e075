#!/usr/bin/env bash
# --backend gloo across hosts: a coordinator with one node of its own (a
# thread of its process, joined over loopback) on host A, and two `smolctl
# node` processes on hosts B and C, each host a network namespace as in
# tst_cluster_hosts.sh. Gloo's devices must bind where the others reach
# them: A's own node on A's address (not 127.0.0.1), B's and C's on theirs.
#
#   1. ddp and zero3 on Gloo over A+B+C end with the parameters of the same
#      run on our transport over A+B+C.
#   2. kill -9 of B's node mid-run: the run re-forms on Gloo with A and C.
#   3. every Gloo pair runs between the hosts' own addresses (A's own
#      node's too), none over loopback.
#
# Needs root (network namespaces): otherwise exit 77 (ctest: not run).
set -euo pipefail

smolctl=${1:?usage: tst_gloo_hosts.sh PATH/TO/smolctl}
# shellcheck source=netns_hosts.sh
source "$(dirname "$0")/netns_hosts.sh"
port=7180 # apart from tst_cluster_hosts.sh's

for strategy in ddp zero3; do
    start_cluster "$strategy-ours" "$strategy" 12
    finish_cluster "$strategy-ours"
    start_cluster "$strategy-gloo" "$strategy" 12 --backend gloo
    finish_cluster "$strategy-gloo"
    want=$(json_field "$work/$strategy-ours.json" param_checksum)
    got=$(json_field "$work/$strategy-gloo.json" param_checksum)
    [[ -n $got && -n $want ]] || fail "$strategy: no summary"
    close_enough "$got" "$want" 1e-4 || fail "$strategy on Gloo across hosts: param_checksum $got, ours $want"
    echo "ok: $strategy on Gloo across hosts A+B+C: param_checksum $got (ours $want)"
done

# kill -9 of B's node mid-run; before it, where Gloo's pairs run.
start_cluster killed ddp 600 --global-batch 60 --backend gloo
for _ in $(seq 1 600); do
    grep -q '"step":20,' "$work/killed.json" 2>/dev/null && break
    sleep 0.1
done
grep -q '"step":20,' "$work/killed.json" || { cat "$work/killed.err"; fail "kill -9: the run did not reach step 20"; }
seen=""
for h in a b c; do
    # Gloo's pairs: established TCP connections in host h's namespace other
    # than the control connections (to or from the coordinator's port). Each
    # must run between the hosts' own addresses, none over loopback.
    pairs=$(ip netns exec "${tag}$h" ss -Htn state established | awk -v p=":$port" '$3 !~ p"$" && $4 !~ p"$" {print $3 " " $4}')
    [[ -n $pairs ]] || fail "host $h: no Gloo pair connected"
    if grep -Eq '(^| )(127\.|\[::1\]|\[::ffff:127\.)' <<<"$pairs"; then
        fail "host $h: a Gloo pair over loopback: $pairs"
    fi
    seen+=" $h: $(wc -l <<<"$pairs") pairs on $(awk '{print $1}' <<<"$pairs" | sed 's/:[0-9]*$//' | sort -u | tr '\n' ' ')"
done
echo "ok: every Gloo pair runs between the hosts' own addresses;$seen"
kill -9 "$node_b"
wait "$node_b" 2>/dev/null || true
finish_cluster killed
reforms=$(json_field "$work/killed.json" reforms)
nodes=$(json_field "$work/killed.json" nodes)
[[ ${reforms:-0} -ge 1 && $nodes == 2 ]] || fail "kill -9: expected a re-form to 2 nodes, got reforms=$reforms nodes=$nodes"
echo "ok: kill -9 of host B's node at step 20 on Gloo: re-formed ($reforms) and finished on $nodes nodes"
echo "1 passed, 0 failed"
