"""Values whose key is not on the value's line: name/value elements, tables, a plan's changes,
an nginx block's directives.

:mod:`tomc._core.values` reads a key and its value from one line (or a section above it). Tools
print many values otherwise: an XML ``<name>`` element followed by its ``<value>``, a table
whose header row names the columns (HTML, ``psql``, ``kubectl get``'s aligned columns) and whose
first cell names the row's owner, a plan's change ``~ key = "old" -> "new"`` under the resource
it changes (Terraform), and a directive ``key value;`` inside an nginx block (``upstream api
{``, ``server {``, ``location /x {``), owned by the block. :func:`read_table_values` reads
those, each value with its key and its owner, so that a neighbour's value is never taken for
it. Every value must be a literal (:func:`tomc._core.values.is_literal`); a table is read for
at most :data:`MAX_ROWS` rows.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence

from .values import MAX_VALUE_CHARS, Value, is_literal

__all__ = ["MAX_ROWS", "read_table_values"]

#: Rows read per table (a listing of thousands is not a table of settings).
MAX_ROWS = 200
_XML_NAME = re.compile(r"\s*<name>([^<>]{1,120})</name>\s*")
_XML_VALUE = re.compile(r"\s*<value>([^<>]{0,200})</value>\s*")
# Possessive runs: no pattern here tries every split of a long run of one character class.
_CHANGE = re.compile(
    r"\s*+[~+]\s++([A-Za-z_][\w.\-]*+)\s++=\s++(\"[^\"]*+\"|\S++)\s++->\s++(\"[^\"]*+\"|\S++)\s*+"
)
_RESOURCE = re.compile(r"\s*+(?:[~+\-]\s*+)?resource\s++\"[^\"]++\"\s++\"([^\"]++)\"\s*+\{\s*+")
_NGINX_BLOCK = re.compile(
    r"\s*+(upstream|server|location|http|events|map|geo|stream)\b\s*+([^{}\s]*+)[^{}]*+\{\s*+"
)
_DIRECTIVE = re.compile(r"\s++([a-z_][a-z0-9_]*+)\s++([^\s;{}#]++);\s*+(?:#.*)?")
_HTML_CELL = re.compile(r"<t([hd])[^>]*>(.*?)</t[hd]>", re.IGNORECASE)
_PSQL_RULE = re.compile(r"\s*-+(?:\+-+)+\s*")
_COLUMNS = re.compile(r"[A-Z][A-Z0-9_()/\-]*+(?: [A-Z][A-Z0-9_()/\-]*+)?")
_HEADER_ROW = re.compile(r"[A-Z][A-Z0-9_()/\-]*+(?: [A-Z][A-Z0-9_()/\-]*+)?\s{2,}+\S.*")
#: A table's row is read only up to this length (a cell pattern on a 100,000-character line of
#: ``<td>`` would scan to its end from each one).
MAX_ROW_CHARS = 2_000


def read_table_values(lines: Sequence[str]) -> list[Value]:
    """Every value the lines state with its key elsewhere (see the module docstring), in the
    order of the lines that hold them."""
    out: list[Value] = []
    scope = ""
    block = ""  # the nginx block the lines are in ("" outside one)
    index = 0
    count = len(lines)
    while index < count:
        line = lines[index]
        following = lines[index + 1] if index + 1 < count else ""
        if opened := _NGINX_BLOCK.fullmatch(line):
            block = f"{opened.group(1)} {opened.group(2)}".strip()
            index += 1
            continue
        if block:
            if line.strip() == "}":
                block = ""
            elif directive := _DIRECTIVE.fullmatch(line):
                _add(out, directive.group(1), directive.group(2), index, "directive", block)
                index += 1
                continue
        if (found := _XML_NAME.fullmatch(line)) and (value := _XML_VALUE.fullmatch(following)):
            _add(out, found.group(1).strip(), value.group(1), index + 1, "xml", "")
            index += 2
            continue
        if resource := _RESOURCE.fullmatch(line):
            scope = resource.group(1)
        elif change := _CHANGE.fullmatch(line):
            _add(out, change.group(1), change.group(3).strip('"'), index, "change", scope)
        elif "<t" in line.lower() and (header := _cells(line, "h")):
            index = _table(out, lines, index, header, _html_row)
            continue
        elif "|" in line and _PSQL_RULE.fullmatch(following):
            header = [cell.strip() for cell in line.split("|")]
            index = _table(out, lines, index + 1, header, _psql_row)
            continue
        elif _HEADER_ROW.fullmatch(line.rstrip()) and following.strip():
            columns = [(m.start(), m.group()) for m in _COLUMNS.finditer(line)]
            if len(columns) >= 2 and _aligned(columns, following):
                index = _columns(out, lines, index, columns)
                continue
        index += 1
    return out


def _add(out: list[Value], key: str, raw: str, line: int, form: str, scope: str) -> None:
    raw = html.unescape(raw).strip()
    if key and raw and len(raw) <= MAX_VALUE_CHARS and is_literal(raw):
        out.append(Value(key, raw.strip("'\""), line, form, scope))


def _cells(line: str, kind: str) -> list[str]:
    if len(line) > MAX_ROW_CHARS:
        return []
    cells = _HTML_CELL.findall(line)
    if not cells or any(tag.lower() != kind for tag, _ in cells):
        return []
    return [re.sub(r"<[^>]+>", "", text).strip() for _, text in cells]


def _html_row(line: str) -> list[str] | None:
    return _cells(line, "d") or None


def _psql_row(line: str) -> list[str] | None:
    if "|" not in line or len(line) > MAX_ROW_CHARS or line.strip().startswith("("):
        return None
    return [cell.strip() for cell in line.split("|")]


def _table(
    out: list[Value],
    lines: Sequence[str],
    index: int,
    header: list[str],
    row_of: Callable[[str], list[str] | None],
) -> int:
    """Rows after ``header`` (at ``index``): each cell a value of its column's key, owned by
    the row's first cell; the index after the table."""
    index += 1
    for _ in range(MAX_ROWS):
        if index >= len(lines):
            break
        cells = row_of(lines[index])
        if cells is None or len(cells) != len(header):
            break
        owner = cells[0]
        for key, cell in zip(header[1:], cells[1:], strict=True):
            _add(out, _key(key), cell, index, "table", owner)
        index += 1
    return index


def _key(header: str) -> str:
    """A column's name as a key (``Pool Size`` -> ``pool_size``)."""
    return re.sub(r"\W+", "_", header.strip()).strip("_").lower()


def _aligned(columns: list[tuple[int, str]], line: str) -> bool:
    """Whether ``line``'s cells start where the header's columns do (kubectl's output)."""
    return all(start == 0 or line[start - 1 : start] == " " for start, _ in columns) and all(
        line[start : start + 1].strip() for start, _ in columns if start < len(line)
    )


def _columns(out: list[Value], lines: Sequence[str], index: int, columns) -> int:
    """Rows of aligned columns under a header of capitalised names (``kubectl get``): each cell
    a value of its column, owned by the row's first cell; the index after them."""
    starts = [start for start, _ in columns]
    index += 1
    for _ in range(MAX_ROWS):
        if index >= len(lines) or not lines[index].strip():
            break
        line = lines[index]
        cells = [
            line[start : starts[n + 1] if n + 1 < len(starts) else len(line)].strip()
            for n, start in enumerate(starts)
        ]
        if not all(cells):
            break
        for (_, name), cell in zip(columns[1:], cells[1:], strict=True):
            _add(out, _key(name), cell, index, "table", cells[0])
        index += 1
    return index
