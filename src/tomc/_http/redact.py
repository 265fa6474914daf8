"""Secrets out of log lines: query values, credentials, cookies, key-shaped strings.

The gateway's own messages never name a credential, but the libraries under it do when they log
a request: uvicorn's access line and httpx2's ``HTTP Request:`` line carry the full URL (Gemini
style ``?key=...``), and httpcore2's debug trace prints response headers (``set-cookie``).
:func:`install_redaction` puts a filter on those loggers (and on the root logger's handlers) that
rewrites each record's message through :func:`redact` before any handler sees it, at every
level.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

__all__ = ["LOGGERS", "MASK", "RedactingFilter", "install_redaction", "redact"]

MASK = "***"
#: Loggers whose records are redacted (with their children known at install time).
LOGGERS = (
    "tomc",
    "uvicorn",
    "uvicorn.error",
    "uvicorn.access",
    "uvicorn.asgi",
    "httpx2",
    "httpcore2",
    "httpcore2.connection",
    "httpcore2.connection_pool",
    "httpcore2.http11",
    "httpcore2.http2",
    "httpcore2.proxy",
    "httpcore2.socks",
    "httpx",
    "httpcore",
)
# Query parameters whose values are kept: they say which API variant, never who is calling.
_PLAIN_QUERY = frozenset({"beta", "api-version"})
_QUERY = re.compile(r"(?P<lead>[?&](?P<name>[^=&\s#\"'<>?]+)=)(?P<value>[^&\s#\"'<>]*)")
# ": ", "=", "': '" (a dict), "', b'" (httpcore2's header tuples).
_SEPARATOR = r"""(?P<sep>["']?\s*[:=,]\s*(?:b(?=["']))?["']?)"""
_CREDENTIAL_HEADER = re.compile(
    r"(?i)(?<![\w-])(?P<name>authorization|proxy-authorization|x-api-key|x-goog-api-key|api-key)"
    + _SEPARATOR
    + r"(?P<scheme>(?:bearer|basic|token)\s+)?(?P<value>[^\s'\",;)\]}&]+)"
)
_COOKIE_HEADER = re.compile(
    r"(?i)(?<![\w-])(?P<name>set-cookie|cookie)" + _SEPARATOR + r"(?P<value>[^'\"\r\n]+)"
)
_BEARER = re.compile(r"(?i)\b(?P<scheme>bearer)\s+[A-Za-z0-9._~+/=-]{6,}")
# Key shapes worth masking wherever they appear: OpenAI and Anthropic (sk-...), Google (AIza...).
_KEY_SHAPES = re.compile(r"\b(?P<prefix>sk-|AIza)[A-Za-z0-9_-]{8,}")


def _query(match: re.Match[str]) -> str:
    if match["name"].lower() in _PLAIN_QUERY or not match["value"]:
        return match[0]
    return match["lead"] + MASK


def redact(text: str) -> str:
    """``text`` with every query value (but ``beta`` and ``api-version``), credential header
    value, cookie and key-shaped string replaced by ``***``; the rest is unchanged."""
    text = _QUERY.sub(_query, text)
    text = _CREDENTIAL_HEADER.sub(lambda m: m["name"] + m["sep"] + (m["scheme"] or "") + MASK, text)
    text = _COOKIE_HEADER.sub(lambda m: m["name"] + m["sep"] + MASK, text)
    text = _BEARER.sub(lambda m: f"{m['scheme']} {MASK}", text)
    return _KEY_SHAPES.sub(lambda m: m["prefix"] + MASK, text)


class RedactingFilter(logging.Filter):
    """Rewrites a record whose message, exception or stack holds a secret (see
    :func:`redact`); a record without one is left as it is, arguments included."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed call (arguments that do not fit): keep both, masked
            message = f"{record.msg} {record.args!r}"
            record.msg, record.args = message, None
        masked = redact(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


_FILTER = RedactingFilter()


def install_redaction(extra: Iterable[str] = ()) -> None:
    """Redact every record of :data:`LOGGERS` (and ``extra`` loggers, and the children of both
    that exist now), and every record the root logger's current handlers write. Idempotent."""
    names = {*LOGGERS, *extra}
    existing = [
        name
        for name in list(logging.Logger.manager.loggerDict)
        if any(name.startswith(f"{parent}.") for parent in names)
    ]
    for name in sorted({*names, *existing}):
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
    for handler in logging.getLogger().handlers:
        if _FILTER not in handler.filters:
            handler.addFilter(_FILTER)
