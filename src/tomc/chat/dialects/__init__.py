"""Wire-format dialects: Chat Completions, Anthropic Messages, OpenAI Responses.

The session policy exists once and works on neutral entries; a dialect reads its format into
them and splices the rewritten history back. See :class:`Dialect`.
"""

from __future__ import annotations

from ._base import Dialect, PassThrough
from ._registry import DIALECTS, dialect_for

__all__ = ["DIALECTS", "Dialect", "PassThrough", "dialect_for"]
