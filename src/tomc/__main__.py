"""``python -m tomc``: the same command line as ``tomc``."""

from .cli import main

main()
