# Sourced by the tests that make hosts out of network namespaces
# (tst_cluster_hosts.sh, tst_gloo_hosts.sh), after they set $smolctl: hosts
# A, B and C, each a namespace with its own address on a /24 joined by veth
# pairs to a bridge in a namespace of its own (no route out), all removed
# again on exit; skip (exit 77) without root or `ip`; and the helpers to
# start and finish a cluster of A's coordinator with one local node and
# `smolctl node` processes on B and C.

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

# wait_listening FILE: until the coordinator whose stderr is FILE says it
# listens (a node that connects before is refused; on a loaded machine the
# coordinator takes seconds to get there); fails after 60 s.
wait_listening() {
    local i
    for ((i = 0; i < 600; ++i)); do
        grep -q "listening on port" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    cat "$1"
    fail "the coordinator did not listen within 60 s"
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
    wait_listening "$work/$name.err"
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
