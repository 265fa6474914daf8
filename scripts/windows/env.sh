# Sourced by the scripts beside it: where the Windows runtime under Wine lives.
# TOMC_WINDOWS_HOME (default ~/.cache/tomc-windows) holds the downloads, the embeddable
# CPython with its site-packages (python/) and the Wine prefix (prefix/).
TOMC_WINDOWS_HOME="${TOMC_WINDOWS_HOME:-$HOME/.cache/tomc-windows}"
WINDOWS_PYTHON_DIR="$TOMC_WINDOWS_HOME/python"
export WINEPREFIX="$TOMC_WINDOWS_HOME/prefix"
export WINEDEBUG="${WINEDEBUG:--all}"
# No Mono or Gecko install prompts (neither is reachable offline, nor needed).
export WINEDLLOVERRIDES="${WINEDLLOVERRIDES:-mscoree,mshtml=}"
