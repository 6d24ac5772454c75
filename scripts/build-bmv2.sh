#!/usr/bin/env bash
# make bmv2: builds p4lang's reference switch (simple_switch, simple_switch_grpc, simple_switch_CLI)
# from unmodified source snapshots into build/oracle/, as a test oracle.
#
#   bash scripts/build-bmv2.sh                  (make bmv2; make test runs it too)
#   bash scripts/build-bmv2.sh --sources-only   (make bmv2-sources: find or fetch them, no build)
#   bash scripts/build-bmv2.sh --packages-only  (the Debian packages the build needs, then stop:
#                                                .ci/run installs them first so that the build can
#                                                run beside make setup's own apt-get)
#
# The snapshots come from ORACLE=DIR if given, else ../shared/oracle, else the projects' public
# archives: scripts/fetch_bmv2_sources.py downloads the pinned commits (BMV2_ARCHIVES=URL names
# another server), verifies each against the SHA-256 it records and makes the same two tarballs
# in build/oracle/archives; one that does not verify is refused and nothing is built.
#
# Nothing of the oracle's code enters the project: the tarballs are unpacked under build/ and
# built there. The build is cached: a stamp names the snapshots and the flags, so a second run is
# a no-op, and a run with other snapshots or flags rebuilds.
#
# One build, configured as BMv2's performance docs configure it (-O3, logging macros and the
# event logger compiled out): the same binary serves the benchmark and the tests, so what the
# tests check is what the benchmark measures.
#
# PI first (the P4Runtime server library), then BMv2 --with-pi; both install into
# build/oracle/prefix, and build/oracle/bin holds the three commands.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=$root/build/oracle
prefix=$out/prefix
src=$out/src
jobs=${JOBS:-$(nproc)}
sources_only=0
[[ "${1:-}" == "--sources-only" ]] && sources_only=1

start=$SECONDS
stage() { printf '\033[1m[bmv2 %3dm%02ds]\033[0m %s\n' $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)) "$*"; }

source scripts/debian-packages.sh
install_packages() {
    install_missing bmv2 autoconf automake libtool pkg-config g++ make \
        libboost-dev libboost-system-dev libboost-thread-dev libboost-program-options-dev \
        libboost-filesystem-dev libgmp-dev libpcap-dev libthrift-dev thrift-compiler \
        python3-thrift libnanomsg-dev libxxhash-dev libjsoncpp-dev libssl-dev \
        protobuf-compiler libprotobuf-dev libgrpc++-dev protobuf-compiler-grpc libgrpc-dev
}
if [[ "${1:-}" == "--packages-only" ]]; then
    install_packages
    exit 0
fi

has_snapshots() { compgen -G "$1/behavioral-model-*.tar.gz" >/dev/null && compgen -G "$1/PI-*.tar.gz" >/dev/null; }
built() { [[ -f "$out/.built" && -x "$out/bin/simple_switch_grpc" ]]; }

if [[ -n "${ORACLE:-}" ]]; then
    oracle_src=$ORACLE
elif has_snapshots "$root/../shared/oracle"; then
    oracle_src=$(cd "$root/../shared/oracle" && pwd)
else
    # No ../shared (anywhere outside this workplace): the same commits from their public archives,
    # verified, unless an earlier run fetched them already.
    oracle_src=$out/archives
    if ! has_snapshots "$oracle_src"; then
        echo "[bmv2] no ../shared/oracle: fetching the pinned sources (scripts/fetch_bmv2_sources.py)"
        fetched=0
        python3 scripts/fetch_bmv2_sources.py "$oracle_src" || fetched=$?
        if ((fetched != 0)); then
            # Unreachable (3): a build already made is still usable. A refused archive (1) fails.
            if ((fetched == 3 && sources_only == 0)) && built; then
                echo "[bmv2] could not fetch the sources; keeping the build in $out ($(cut -d' ' -f1-2 "$out/.built"))"
                exit 0
            fi
            echo "bmv2: no sources to build from (ORACLE=DIR, ../shared/oracle or the public archives)" >&2
            exit 1
        fi
    fi
fi

bmv2_tar=$(ls "$oracle_src"/behavioral-model-*.tar.gz 2>/dev/null | head -n1 || true)
pi_tar=$(ls "$oracle_src"/PI-*.tar.gz 2>/dev/null | head -n1 || true)
if [[ -z "$bmv2_tar" || -z "$pi_tar" ]]; then
    # Without the snapshots a finished build is still usable; nothing can say if it is current.
    if ((sources_only == 0)) && built; then
        echo "[bmv2] no oracle snapshots in $oracle_src; keeping the build in $out ($(cut -d' ' -f1-2 "$out/.built"))"
        exit 0
    fi
    echo "bmv2: no oracle snapshots in $oracle_src (expected behavioral-model-*.tar.gz and PI-*.tar.gz)" >&2
    exit 1
fi
if ((sources_only)); then
    echo "[bmv2] sources: $bmv2_tar $pi_tar"
    exit 0
fi

bmv2_flags=(--with-pi --with-thrift --disable-logging-macros --disable-elogger
            --without-nanomsg-examples)
pi_flags=(--with-proto --without-internal-rpc --without-cli --without-bmv2)
cxxflags="-O3 -g0"
stamp_text="$(basename "$bmv2_tar") $(basename "$pi_tar") ${bmv2_flags[*]} ${pi_flags[*]} $cxxflags"
stamp=$out/.built
if [[ -f "$stamp" && "$(cat "$stamp")" == "$stamp_text" && -x "$out/bin/simple_switch_grpc" ]]; then
    echo "[bmv2] up to date: $out/bin/simple_switch_grpc"
    exit 0
fi


# run LOG CMD...: quiet unless it fails; a failure shows the log's tail.
run() {
    local log=$1; shift
    if ! "$@" >>"$log" 2>&1; then
        echo "[bmv2] failed: $* (log: $log)" >&2
        tail -n 40 "$log" >&2
        exit 1
    fi
}

# --- Debian packages (idempotent, as in scripts/setup.sh) ---------------------------------------
install_packages

rm -rf "$src" "$prefix" "$out/bin" "$stamp"
mkdir -p "$src" "$prefix" "$out/bin" "$out/logs"
logs=$out/logs
rm -f "$logs"/*.log
stage "unpacking $(basename "$pi_tar") and $(basename "$bmv2_tar")"
tar -xzf "$pi_tar" -C "$src"
tar -xzf "$bmv2_tar" -C "$src"

export CPPFLAGS="-I$prefix/include"
export LDFLAGS="-L$prefix/lib -Wl,-rpath,$prefix/lib"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"

stage "PI: configure (1/6; about 1 minute)"
cd "$src/PI"
run "$logs/pi.log" ./autogen.sh
run "$logs/pi.log" ./configure --prefix="$prefix" "${pi_flags[@]}" CXXFLAGS="$cxxflags" CFLAGS="$cxxflags"
stage "PI: compile (2/6; about 4 minutes on 2 cores)"
run "$logs/pi.log" make -j"$jobs"
stage "PI: install (3/6)"
run "$logs/pi.log" make install

stage "BMv2: configure (4/6; about 1 minute)"
cd "$src/behavioral-model"
run "$logs/bmv2.log" ./autogen.sh
run "$logs/bmv2.log" ./configure --prefix="$prefix" "${bmv2_flags[@]}" \
    CXXFLAGS="$cxxflags" CFLAGS="$cxxflags"
# Only the libraries and the two simple_switch targets (and the CLI's tools): psa_switch,
# pna_nic, simple_router and l2_switch are not needed and would add minutes.
subdirs=(thrift_src third_party proto src include PI services targets/simple_switch
         targets/simple_switch_grpc tools)
stage "BMv2: compile (5/6; about 10 minutes on 2 cores)"
for d in "${subdirs[@]}"; do
    [[ -f "$d/Makefile" ]] || continue
    stage "BMv2: compile $d"
    run "$logs/bmv2.log" make -j"$jobs" -C "$d"
done
stage "BMv2: install (6/6)"
for d in "${subdirs[@]}"; do
    [[ -f "$d/Makefile" ]] || continue
    run "$logs/bmv2.log" make -C "$d" install
done

# simple_switch_grpc lives in its own target directory with its own install step in some
# snapshots; make sure all three commands are in the prefix.
for cmd in simple_switch simple_switch_grpc simple_switch_CLI; do
    if [[ ! -x "$prefix/bin/$cmd" ]]; then
        echo "bmv2: $cmd was not installed into $prefix/bin" >&2
        exit 1
    fi
    ln -sf "$prefix/bin/$cmd" "$out/bin/$cmd"
done
# The CLI is Python and imports Debian's thrift module (python3-thrift), which only Debian's
# interpreter has; `env python3` may find another one (pyenv, a venv) first.
rm -f "$out/bin/simple_switch_CLI"
printf '#!/bin/sh\nexec /usr/bin/python3 %q "$@"\n' "$prefix/bin/simple_switch_CLI" >"$out/bin/simple_switch_CLI"
chmod +x "$out/bin/simple_switch_CLI"
"$out/bin/simple_switch_grpc" --help >/dev/null 2>&1 || {
    echo "bmv2: the built simple_switch_grpc does not start:" >&2
    "$out/bin/simple_switch_grpc" --help 2>&1 | tail -n 5 >&2
    exit 1
}
echo "$stamp_text" >"$stamp"
stage "built: $out/bin/{simple_switch,simple_switch_grpc,simple_switch_CLI}"
