"""``python -m tomc``: the same command line as ``tomc``."""

from ._cli import main

main()
