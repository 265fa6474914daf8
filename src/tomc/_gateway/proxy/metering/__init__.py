"""Metering: what one request used and billed, and the usage book that keeps it.

:mod:`.meter` (one request's bookkeeping: the usage sniffer the relay feeds, the session's
usage feedback, the book entry, the hand-back), :mod:`.usage` (the providers' usage in one
shape, billed input, the direct estimate), :mod:`.ledger` (the usage book's interface and its
SQLite kind; ``Ledger`` is the usage book, not the compiler's audit of candidate records),
:mod:`.ledger_file` (its file) and :mod:`.traffic` (its figures). The book kept in Redis is a
store kind's (:mod:`tomc._gateway.proxy.store.redis_ledger`).
"""
