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

smolctl=${1:?usage: tst_cluster_hosts.sh PATH/TO/smolctl}
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

[[ $(id -u) -eq 0 ]] || skip "making network namespaces needs root"
command -v ip >/dev/null || skip "no 'ip' command (Debian package iproute2)"

tag="sm$$"                      # unique per run: names stay under 15 characters
net="10.213.$(($$ % 200 + 20))" # a /24 that exists only inside these namespaces
ns_br="${tag}br" hosts=(a b c)
work=$(mktemp -d)
pids=()

cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    for h in "${hosts[@]}"; do ip netns del "${tag}$h" 2>/dev/null || true; done
    ip netns del "$ns_br" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

ip netns add "$ns_br" 2>/dev/null || skip "cannot create network namespaces here (ip netns add failed)"
ip -n "$ns_br" link add br0 type bridge
ip -n "$ns_br" link set br0 up
i=1
for h in "${hosts[@]}"; do
    ns="${tag}$h"
    ip netns add "$ns"
    ip -n "$ns" link add eth0 type veth peer name "v$h" netns "$ns_br"
    ip -n "$ns_br" link set "v$h" master br0 up
    ip -n "$ns" addr add "$net.$i/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    i=$((i + 1))
done
addr_a="$net.1"
echo "hosts: A $addr_a, B $net.2, C $net.3 (namespaces ${tag}a/b/c, bridge in $ns_br)"

json_field() { # FILE KEY: the last summary's value of KEY
    grep '"type":"summary"' "$1" | tail -1 | sed -n "s/.*\"$2\":\([^,}]*\).*/\1/p"
}
close_enough() { # A B TOL
    awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t) }'
}

port=7080
# run_cluster NAME STRATEGY STEPS [extra coordinator args]: A with one local
# node; B and C join. Leaves the coordinator's output in $work/NAME.json/.err.
start_cluster() {
    local name=$1 strategy=$2 steps=$3
    shift 3
    port=$((port + 1))
    ip netns exec "${tag}a" timeout 300 "$smolctl" train --listen "$port" --token t --local-nodes 1 \
        --wait-nodes 3 --nodes 3 --strategy "$strategy" --steps "$steps" --seed 3 --wait-timeout 60 --json "$@" \
        >"$work/$name.json" 2>"$work/$name.err" </dev/null &
    coordinator=$!
    pids+=("$coordinator")
    sleep 0.5
    ip netns exec "${tag}b" "$smolctl" node --join "$addr_a:$port" --token t --name pi-1 \
        >"$work/$name.b.log" 2>&1 </dev/null &
    node_b=$!
    pids+=("$node_b")
    ip netns exec "${tag}c" "$smolctl" node --join "$addr_a:$port" --token t --name pi-2 \
        >"$work/$name.c.log" 2>&1 </dev/null &
    pids+=("$!")
}
finish_cluster() { # NAME: wait for the coordinator; fails with its stderr
    local name=$1
    if ! wait "$coordinator"; then
        cat "$work/$name.err"
        fail "$name: the coordinator failed"
    fi
}

port=7180
start_cluster() { # NAME STRATEGY STEPS [extra coordinator args]
    local name=$1 strategy=$2 steps=$3
    shift 3
    port=$((port + 1))
    ip netns exec "${tag}a" timeout 300 "$smolctl" train --listen "$port" --token t --local-nodes 1 \
        --wait-nodes 3 --nodes 3 --strategy "$strategy" --steps "$steps" --seed 3 --wait-timeout 60 --json "$@" \
        >"$work/$name.json" 2>"$work/$name.err" </dev/null &
    coordinator=$!
    pids+=("$coordinator")
    sleep 0.5
    ip netns exec "${tag}b" "$smolctl" node --join "$addr_a:$port" --token t --name pi-1 \
        >"$work/$name.b.log" 2>&1 </dev/null &
    node_b=$!
    pids+=("$node_b")
    ip netns exec "${tag}c" "$smolctl" node --join "$addr_a:$port" --token t --name pi-2 \
        >"$work/$name.c.log" 2>&1 </dev/null &
    pids+=("$!")
}
finish_cluster() { # NAME
    local name=$1
    if ! wait "$coordinator"; then
        cat "$work/$name.err"
        fail "$name: the coordinator failed"
    fi
}

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
