#!/usr/bin/env bash
# The Debian package a lab installs on each machine (cmake/Packaging.cmake):
# made by cpack from the executables already built (cpack builds nothing),
# into a scratch directory; then, without root:
#
#   1. its name is smolcluster_<version>_<arch>.deb, its control fields name
#      the package, version and the runtime Debian packages, and apt would
#      install it here (apt-get --simulate) with nothing left to resolve;
#   2. it holds both executables, the .desktop entry, the icon, the lessons
#      and the docs under /usr;
#   3. extracted into a scratch root (dpkg-deb -x), the executables carry no
#      RPATH and resolve every library from the system;
#   4. the extracted smolctl, found on the PATH and run outside the source
#      tree, prints its help, lists the compiled-in lessons, and coordinates
#      a 2-node ddp run that an extracted `smolctl node --join` takes part in.
#
# Exit 77 (ctest: not run) where dpkg-deb or dpkg-shlibdeps is missing.
set -euo pipefail

cpack=${1:?usage: tst_package.sh CPACK BUILD_DIR VERSION}
build=${2:?usage: tst_package.sh CPACK BUILD_DIR VERSION}
version=${3:?usage: tst_package.sh CPACK BUILD_DIR VERSION}
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

for tool in dpkg-deb dpkg-shlibdeps readelf; do
    command -v "$tool" >/dev/null || skip "no $tool (Debian packages dpkg-dev, binutils)"
done

work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# --- the package --------------------------------------------------------
"$cpack" --config "$build/CPackConfig.cmake" -B "$work/out" >"$work/cpack.log" 2>&1 ||
    { cat "$work/cpack.log"; fail "cpack failed"; }
arch=$(dpkg --print-architecture)
deb="$work/out/smolcluster_${version}_${arch}.deb"
[[ -f $deb ]] || { ls "$work/out"; fail "no $deb"; }
echo "package: $(basename "$deb"), $(stat -c %s "$deb") bytes"

[[ $(dpkg-deb -f "$deb" Package) == smolcluster ]] || fail "Package is not smolcluster"
[[ $(dpkg-deb -f "$deb" Version) == "$version" ]] || fail "Version is not $version"
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
for pkg in libtorch1.13 libqt6core6 libqt6widgets6 libqt6charts6 libqt6sql6-sqlite dataset-fashion-mnist; do
    [[ ",$depends," == *[\ ,]$pkg[\ ,\(]* ]] || fail "Depends lacks $pkg"
done
# Every dependency is a real Debian package, installed on this build machine.
for pkg in $(tr ',' '\n' <<<"$depends" | sed 's/(.*)//; s/ //g'); do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" ||
        fail "dependency $pkg is not an installed Debian package here"
done
if command -v apt-get >/dev/null; then
    apt-get install --simulate --no-install-recommends "$deb" >"$work/apt.log" 2>&1 ||
        { cat "$work/apt.log"; fail "apt-get --simulate install of the package failed"; }
    grep -q '^Inst smolcluster ' "$work/apt.log" || { cat "$work/apt.log"; fail "apt would not install smolcluster"; }
fi

dpkg-deb -c "$deb" | awk '{print $NF}' >"$work/contents"
for f in ./usr/bin/smolctl ./usr/bin/smolcluster \
         ./usr/share/applications/smolcluster.desktop \
         ./usr/share/icons/hicolor/scalable/apps/smolcluster.svg \
         ./usr/share/smolcluster/lessons/zero.lesson \
         ./usr/share/doc/smolcluster/README.md ./usr/share/doc/smolcluster/docs/runtime.md; do
    grep -qx -- "$f" "$work/contents" || fail "package lacks $f"
done
grep -v '^\./usr/' "$work/contents" | grep -vqx '\./' && fail "package installs outside /usr"
echo "contents: $(grep -vc '/$' "$work/contents") files under /usr"

# --- extracted into a scratch root ---------------------------------------
root="$work/root"
dpkg-deb -x "$deb" "$root"
for exe in smolctl smolcluster; do
    if readelf -d "$root/usr/bin/$exe" | grep -q 'R\(UN\)\?PATH'; then
        fail "installed $exe has an RPATH: $(readelf -d "$root/usr/bin/$exe" | grep PATH)"
    fi
    if ldd "$root/usr/bin/$exe" | grep -q 'not found'; then
        fail "installed $exe: $(ldd "$root/usr/bin/$exe" | grep 'not found')"
    fi
done

# Outside the source tree, with a scratch home (the data cache goes there).
mkdir -p "$work/home"
cd "$work/home"
export HOME="$work/home" XDG_CACHE_HOME="$work/home/.cache" PATH="$root/usr/bin:$PATH"
[[ $(command -v smolctl) == "$root/usr/bin/smolctl" ]] || fail "smolctl on the PATH is $(command -v smolctl)"

smolctl --help >"$work/help.txt" || fail "smolctl --help exited $?"
grep -q 'node' "$work/help.txt" || fail "smolctl --help does not mention node"
smolctl lesson --list >"$work/lessons.txt" || fail "smolctl lesson --list exited $?"
for lesson in "$root"/usr/share/smolcluster/lessons/*.lesson; do
    name=$(basename "$lesson" .lesson)
    grep -q "^$name[[:space:]]" "$work/lessons.txt" || fail "smolctl lesson --list lacks $name"
done
QT_QPA_PLATFORM=offscreen smolcluster --help >/dev/null || fail "smolcluster --help exited $?"

# A coordinator with one node of its own; one `smolctl node --join` process.
timeout 90 smolctl train --listen 0 --token t --local-nodes 1 --wait-nodes 2 --nodes 2 \
    --strategy ddp --steps 5 --seed 3 --wait-timeout 60 --json \
    >"$work/train.json" 2>"$work/train.err" </dev/null &
coordinator=$!
pids+=("$coordinator")
port=
for _ in $(seq 200); do
    port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$work/train.err")
    [[ -n $port ]] && break
    kill -0 "$coordinator" 2>/dev/null || break
    sleep 0.1
done
[[ -n $port ]] || { cat "$work/train.err"; fail "the coordinator did not say its port"; }
node_status=0
timeout 90 smolctl node --join "127.0.0.1:$port" --token t --name installed \
    >"$work/node.log" 2>&1 </dev/null || node_status=$?
coordinator_status=0
wait "$coordinator" || coordinator_status=$?
pids=()
[[ $coordinator_status -eq 0 ]] || { cat "$work/train.err"; fail "smolctl train exited $coordinator_status"; }
[[ $node_status -eq 0 ]] || { cat "$work/node.log"; fail "smolctl node exited $node_status"; }
summary=$(grep '"type":"summary"' "$work/train.json" | tail -1)
[[ $summary == *'"nodes":2'* && $summary == *'"steps":5'* ]] || fail "unexpected summary: $summary"
grep -q "'installed'" "$work/train.err" || { cat "$work/train.err"; fail "the joined node is not in the run"; }
echo "installed smolctl: ddp on 2 nodes (one joined with smolctl node --join), 5 steps, exit 0"
echo "PASS"
