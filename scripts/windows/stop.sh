#!/usr/bin/env bash
# Stops the wineserver of the Windows runtime's prefix (and every Windows process in it), no other.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd -P)"
# shellcheck source=env.sh
. "$HERE/env.sh"
if [ -d "$WINEPREFIX" ] && command -v wineserver >/dev/null; then
    wineserver -k 2>/dev/null || true
fi
