#!/usr/bin/env bash
# Install what tests/integration/test_clients.py needs, only what is missing:
#   Debian   memcached (memcached-tool), libmemcached-tools (memcdump,
#            memcstat), php-cli + php-memcached, nutcracker (twemproxy), perl
#   PyPI     pymemcache, python-memcached, pylibmc (for the python3 on PATH)
#   npm      memcached@2.2.2, memjs@1.3.2 -> $CACHE/node/node_modules
#   cargo    tests/integration/clients/rustmc (the `memcache` crate 0.17.2)
#            -> $CACHE/rust/target/release/rustmc
#   Go       github.com/bradfitz/gomemcache (module cache $CACHE/go/mod),
#            memcached_exporter v0.13.0 -> $CACHE/go/bin/memcached_exporter
# CACHE is $SLABCACHE_CLIENT_CACHE, default /var/cache/slabcache (the test
# reads the same variable). Each part is tried on its own: an unreachable
# registry leaves that part missing (the matching check skips) and this
# script still exits 0, listing what is missing at the end.
set -uo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${SLABCACHE_CLIENT_CACHE:-/var/cache/slabcache}"
NODE_PKG="memcached@2.2.2"
MEMJS_PKG="memjs@1.3.2"
EXPORTER_MOD="github.com/prometheus/memcached_exporter"
EXPORTER_VER="v0.13.0"
APT_PKGS="memcached libmemcached-tools php-cli php-memcached nutcracker perl"
missing=()

log() { echo "setup-clients: $*" >&2; }

SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
fi

# ---------------------------------------------------------------- Debian
apt_updated=""
apt_install() {  # apt_install PKG...: install those not installed
    local want=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
            || want+=("$p")
    done
    [ ${#want[@]} -eq 0 ] && return 0
    if [ "$(id -u)" -ne 0 ] && [ -z "$SUDO" ]; then
        log "need root to install: ${want[*]}"
        return 1
    fi
    log "apt: installing ${want[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if [ -z "$apt_updated" ]; then
        timeout 300 $SUDO apt-get update -qq >/dev/null 2>&1 || log "apt-get update failed"
        apt_updated=1
    fi
    # one by one, so one unavailable package does not block the others
    local rc=0
    for p in "${want[@]}"; do
        timeout 600 $SUDO apt-get install -y -qq --no-install-recommends "$p" \
            >/dev/null 2>&1 || { log "apt: could not install $p"; rc=1; }
    done
    return $rc
}

apt_install $APT_PKGS
for p in $APT_PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
        || missing+=("apt:$p")
done

# ---------------------------------------------------------------- PyPI
PY="$(command -v python3 || true)"
pip_need=()
if [ -z "$PY" ]; then
    missing+=("python3")
else
    "$PY" -c "import pymemcache" 2>/dev/null || pip_need+=("pymemcache==4.0.0")
    "$PY" -c "import memcache" 2>/dev/null || pip_need+=("python-memcached==1.62")
    "$PY" -c "import pylibmc" 2>/dev/null || pip_need+=("pylibmc==1.6.3")
    if [ ${#pip_need[@]} -gt 0 ]; then
        log "pip: installing ${pip_need[*]}"
        for p in "${pip_need[@]}"; do
            if ! timeout 300 "$PY" -m pip install -q --disable-pip-version-check "$p" \
                    >/dev/null 2>&1; then
                if [ "${p%%==*}" = pylibmc ]; then
                    # no wheel for this python: build against libmemcached
                    apt_install build-essential libmemcached-dev zlib1g-dev
                    timeout 600 "$PY" -m pip install -q --disable-pip-version-check \
                        "$p" >/dev/null 2>&1 || log "pip: could not install pylibmc"
                else
                    log "pip: could not install $p"
                fi
            fi
        done
    fi
    "$PY" -c "import pymemcache" 2>/dev/null || missing+=("pip:pymemcache")
    "$PY" -c "import memcache" 2>/dev/null || missing+=("pip:python-memcached")
    "$PY" -c "import pylibmc" 2>/dev/null || missing+=("pip:pylibmc")
fi

mkdir -p "$CACHE" 2>/dev/null || $SUDO mkdir -p "$CACHE" 2>/dev/null \
    || log "cannot create $CACHE"

# ---------------------------------------------------------------- npm
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    apt_install nodejs npm
fi
npm_install() {  # npm_install NAME@VERSION: into $CACHE/node unless there
    local pkg="$1" name="${1%@*}"
    if [ ! -f "$CACHE/node/node_modules/$name/package.json" ] && command -v npm >/dev/null 2>&1; then
        log "npm: installing $pkg into $CACHE/node"
        mkdir -p "$CACHE/node" \
            && timeout 300 npm install --prefix "$CACHE/node" --no-audit --no-fund \
                --fetch-retries=1 --fetch-retry-mintimeout=2000 \
                --fetch-retry-maxtimeout=10000 --loglevel=error "$pkg" >/dev/null 2>&1 \
            || log "npm: could not install $pkg"
    fi
    [ -f "$CACHE/node/node_modules/$name/package.json" ] || missing+=("npm:$pkg")
}
npm_install "$NODE_PKG"
npm_install "$MEMJS_PKG"

# ---------------------------------------------------------------- cargo
# The Rust `memcache` crate (binary protocol by default): a small helper
# built once into the cache. Debian's cargo is enough; rustup's is used
# when it is on PATH already.
CARGO="$(command -v cargo || true)"
[ -z "$CARGO" ] && [ -x "$HOME/.cargo/bin/cargo" ] && CARGO="$HOME/.cargo/bin/cargo"
if [ -z "$CARGO" ]; then
    apt_install cargo && CARGO="$(command -v cargo || true)"
fi
rustmc="$CACHE/rust/target/release/rustmc"
# Built again when its sources changed (their checksum is kept beside it).
rustsrc="$root/tests/integration/clients/rustmc"
rustsum=$(cat "$rustsrc/Cargo.toml" "$rustsrc/src/main.rs" 2>/dev/null | sha256sum | cut -c1-64)
if [ -n "$CARGO" ] && { [ ! -x "$rustmc" ] ||
        [ "$(cat "$CACHE/rust/built-from" 2>/dev/null)" != "$rustsum" ]; }; then
    log "cargo: building the memcache crate helper"
    mkdir -p "$CACHE/rust" \
        && CARGO_TARGET_DIR="$CACHE/rust/target" CARGO_HOME="${CARGO_HOME:-$CACHE/rust/home}" \
            timeout 900 "$CARGO" build --release --locked --quiet \
            --manifest-path "$rustsrc/Cargo.toml" >/dev/null 2>&1 \
        && echo "$rustsum" > "$CACHE/rust/built-from" \
        || log "cargo: could not build the memcache crate helper"
fi
[ -x "$rustmc" ] || missing+=("cargo:memcache")
command -v node >/dev/null 2>&1 || missing+=("node")

# ---------------------------------------------------------------- Go
GO="$(command -v go || true)"
[ -z "$GO" ] && [ -x /usr/local/go/bin/go ] && GO=/usr/local/go/bin/go
if [ -z "$GO" ]; then
    apt_install golang-go && GO="$(command -v go || true)"
fi
if [ -z "$GO" ]; then
    missing+=("go")
else
    export GOMODCACHE="${GOMODCACHE:-$CACHE/go/mod}"
    export GOCACHE="${GOCACHE:-$CACHE/go/build-cache}"
    export GOPATH="${GOPATH:-$CACHE/go/path}"
    export GOTOOLCHAIN=local
    export GOFLAGS="${GOFLAGS:-} -modcacherw"
    mkdir -p "$CACHE/go/bin"

    # gomemcache: the module the test's helper (tests/integration/clients/gomc)
    # builds against; download it unless already cached
    gomc="$root/tests/integration/clients/gomc"
    if ! (cd "$gomc" && GOPROXY=off "$GO" mod download) >/dev/null 2>&1; then
        log "go: downloading gomemcache"
        (cd "$gomc" && timeout 300 "$GO" mod download) >/dev/null 2>&1 \
            || { log "go: could not download gomemcache"; missing+=("go:gomemcache"); }
    fi

    # memcached_exporter v0.13.0. `go install ...@v0.13.0` needs the proxy's
    # version list (for the deprecation check), which the proxy may refuse;
    # download the module at that version and build it from there instead.
    exp="$CACHE/go/bin/memcached_exporter"
    if [ -x "$exp" ]; then
        :
    elif [ -x "$HOME/go/bin/memcached_exporter" ]; then
        log "go: reusing $HOME/go/bin/memcached_exporter"
    else
        log "go: building memcached_exporter $EXPORTER_VER"
        dir="$(timeout 300 "$GO" mod download -json "$EXPORTER_MOD@$EXPORTER_VER" 2>/dev/null \
               | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
        if [ -n "$dir" ] && [ -d "$dir" ]; then
            (cd "$dir" && timeout 600 "$GO" build -trimpath -o "$exp.tmp" \
                -ldflags "-X github.com/prometheus/common/version.Version=${EXPORTER_VER#v}" \
                ./cmd/memcached_exporter) >/dev/null 2>&1 \
                && mv -f "$exp.tmp" "$exp" \
                || log "go: could not build memcached_exporter"
            rm -f "$exp.tmp"
        else
            log "go: could not download $EXPORTER_MOD@$EXPORTER_VER"
        fi
    fi
    [ -x "$exp" ] || [ -x "$HOME/go/bin/memcached_exporter" ] \
        || missing+=("go:memcached_exporter")
fi

if [ ${#missing[@]} -gt 0 ]; then
    log "missing (their checks will skip): ${missing[*]}"
fi
exit 0
