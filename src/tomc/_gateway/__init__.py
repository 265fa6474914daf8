"""The local request gateway: Claude Code and Codex point at it; it compiles old history.

``tomc gateway serve`` runs one Starlette app (the proxy routes, a status page and the web
source inspector) under uvicorn on loopback. ``tomc run claude|codex`` starts it for one agent
process; ``tomc gateway activate`` points an agent's own configuration at it and
``tomc restore-direct`` puts that configuration back exactly as it was.
"""
