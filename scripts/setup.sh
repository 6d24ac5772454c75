#!/usr/bin/env bash
# Installs what a fresh Debian/Ubuntu machine lacks for Terrapin, then builds the toolchain and the
# P4 program. Idempotent: each step checks before it acts, so a second run takes seconds.
#
#   bash scripts/setup.sh            (make setup; also run by make run and make test)
#
# Needs root for the Debian packages (Mininet, iproute2, ...). Everything else lands in build/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=$root/build
mkdir -p "$build"

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

# --- Debian packages ---------------------------------------------------------------------------
# mininet brings Open vSwitch as a dependency; we use only its hosts, links and CLI.
# chromium: the dashboard's browser tests drive Debian's build through Playwright (a browser
# downloaded by `playwright install` would come from outside the package registries).
# postgresql: the server behind STORE=postgres. Our clusters are started by what needs them (the
# tests, make run, the benchmark) through terrapin_tools.pgserver, each in its own directory on loopback;
# the default cluster Debian's package creates and starts is not used, so it is stopped below.
apt_packages=(mininet iproute2 iputils-ping ethtool tcpdump iperf3 python3-venv python3-pip python3-dev
              curl unzip ca-certificates build-essential sqlite3 procps psmisc chromium postgresql)
source scripts/debian-packages.sh
install_missing setup "${apt_packages[@]}"
if ((${#newly_installed[@]})); then
    # The package's post-install creates a cluster (15/main on port 5432) and starts it where a
    # service manager lets it: stop it and keep it from starting at boot, so it neither takes
    # 5432 nor runs for nothing.
    if [[ " ${newly_installed[*]} " == *" postgresql "* ]] && command -v pg_lsclusters >/dev/null; then
        while read -r ver name _ status _; do
            if [[ "$status" == online* ]]; then pg_ctlcluster "$ver" "$name" stop || true; fi
            if [[ -f "/etc/postgresql/$ver/$name/start.conf" ]]; then
                echo manual >"/etc/postgresql/$ver/$name/start.conf"
            fi
        done < <(pg_lsclusters -h 2>/dev/null || true)
    fi
fi

# --- Go ------------------------------------------------------------------------------------------
# toolchain/go.mod names the Go release it needs. If the machine's go is missing or older, fetch
# that release from the Go module proxy (the same place `GOTOOLCHAIN=auto` gets it from), which is
# reachable where golang.org's download site may not be.
need_go=$(sed -n 's/^go \([0-9.]*\)$/\1/p' toolchain/go.mod)
version_ge() { [[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" == "$2" ]]; }
go_ok() {
    local v
    v=$("$1" env GOVERSION 2>/dev/null) || return 1
    version_ge "${v#go}" "$need_go"
}
gobin=""
for candidate in "$build/go/bin/go" "$(command -v go || true)" /usr/local/go/bin/go; do
    if [[ -n "$candidate" && -x "$candidate" ]] && go_ok "$candidate"; then gobin=$candidate; break; fi
done
if [[ -z "$gobin" ]]; then
    ver=$(curl -fsSL "https://proxy.golang.org/golang.org/toolchain/@v/list" |
          sed -n "s/^v0.0.1-go\(${need_go%.*}\.[0-9]*\)\.linux-amd64$/\1/p" | sort -V | tail -n1)
    [[ -n "$ver" ]] || ver=$need_go
    say "fetching Go $ver from the module proxy"
    tmp=$(mktemp -d)
    curl -fsSL -o "$tmp/go.zip" \
        "https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-go$ver.linux-amd64.zip"
    unzip -q "$tmp/go.zip" -d "$tmp"
    rm -rf "$build/go"
    mv "$tmp/golang.org/toolchain@v0.0.1-go$ver.linux-amd64" "$build/go"
    chmod +x "$build/go/bin/"* "$build/go/pkg/tool/"*/* 2>/dev/null || true
    rm -rf "$tmp"
    gobin=$build/go/bin/go
fi
export PATH="$(dirname "$gobin"):$PATH"
echo "$gobin" >"$build/go.path"

# --- Python --------------------------------------------------------------------------------------
# Debian's python3 carries Mininet's module; the venv sees it through --system-site-packages.
venv=$build/venv
if [[ ! -x "$venv/bin/python" ]]; then
    say "creating the Python virtualenv in build/venv"
    /usr/bin/python3 -m venv --system-site-packages "$venv"
    "$venv/bin/pip" install -q --upgrade pip
fi
# pip install, printing one line per package as pip collects, downloads and installs it (a
# fresh venv takes ~30 s, which looked like a hang when pip ran quietly). The whole output is
# kept in build/pip.log; on failure its tail is shown.
pip_install() {
    local part rc
    part=$(mktemp)
    "$venv/bin/pip" install --progress-bar off "$@" >"$part" 2>&1 &
    local pid=$!
    tail -n +1 -s 0.2 --pid="$pid" -f "$part" 2>/dev/null |
        { grep --line-buffered -E '^(Obtaining|Collecting|Downloading|Building|Installing|Successfully)' || true; } |
        sed -u 's/^/  pip: /'
    wait "$pid" && rc=0 || rc=$?
    cat "$part" >>"$build/pip.log"
    rm -f "$part"
    if ((rc != 0)); then
        tail -n 20 "$build/pip.log" >&2
        echo "setup: pip install $* failed (log: build/pip.log)" >&2
    fi
    return "$rc"
}
stamp=$build/.python-deps
deps_files=(controller/pyproject.toml ptf-tests/requirements.txt topo/requirements.txt)
if [[ ! -f "$stamp" ]] || [[ -n "$(find "${deps_files[@]}" -newer "$stamp" 2>/dev/null)" ]]; then
    : >"$build/pip.log"
    for f in ptf-tests/requirements.txt topo/requirements.txt; do
        [[ -f "$f" ]] || continue
        say "installing Python packages: $f"
        pip_install -r "$f"
    done
    if [[ -f controller/pyproject.toml ]]; then
        say "installing Python packages: the controller (controller/pyproject.toml, with its dev extras)"
        pip_install -e "controller[dev]"
    fi
    # p4lang's p4runtime was a dependency once; its modules cannot be imported beside the
    # protobuf finsy needs, so a venv made then loses it.
    if "$venv/bin/pip" show -q p4runtime >/dev/null 2>&1; then
        say "removing p4runtime (superseded by finsy's P4Runtime modules)"
        "$venv/bin/pip" uninstall -q -y p4runtime
    fi
    touch "$stamp"
fi

# --- Build ---------------------------------------------------------------------------------------
say "building the toolchain and the P4 program"
make --no-print-directory -s toolchain p4 GO="$gobin"
say "ready"
