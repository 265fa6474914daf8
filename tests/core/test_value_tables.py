"""Values whose key is not on the value's line: each read with its key and its owner."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tomc._core.value_tables import MAX_ROWS, read_table_values
from tomc._core.values import Value


def _read(*lines: str) -> list[tuple[str, str, str]]:
    return [(v.scope, v.key, v.value) for v in read_table_values(list(lines))]


def test_an_xml_name_element_names_the_value_after_it():
    assert _read("<property>", "  <name>mail.smtp.port</name>", "  <value>2525</value>") == [
        ("", "mail.smtp.port", "2525")
    ]
    assert _read("<name>a</name>", "<description>x</description>", "<value>1</value>") == []


def test_a_plan_s_change_is_its_new_value_under_its_resource():
    assert _read(
        '  ~ resource "aws_instance" "analytics" {',
        '      ~ instance_type = "m5.large" -> "m6i.2xlarge"',
        "      ~ count = 2 -> 3",
    ) == [("analytics", "instance_type", "m6i.2xlarge"), ("analytics", "count", "3")]


def test_an_nginx_block_s_directives_are_its_values():
    lines = ["upstream billing {", "    keepalive 32;", "    server 10.0.0.1:8080;", "}"]
    assert _read(*lines) == [
        ("upstream billing", "keepalive", "32"),
        ("upstream billing", "server", "10.0.0.1:8080"),
    ]
    assert _read("int main() {", "    return 0;", "}") == []  # code is no nginx block


def test_table_cells_are_values_of_their_column_owned_by_their_row():
    html = ["<tr><th>Service</th><th>Pool Size</th></tr>", "<tr><td>ingest</td><td>48</td></tr>"]
    psql = [" service | pool_size ", "---------+-----------", " ingest  | 48", "(1 row)"]
    kubectl = ["NAME            READY   RESTARTS", "ingest-7d9f     1/1     4"]
    assert _read(*html) == [("ingest", "pool_size", "48")]
    assert _read(*psql) == [("ingest", "pool_size", "48")]
    assert _read(*kubectl) == [("ingest-7d9f", "ready", "1/1"), ("ingest-7d9f", "restarts", "4")]
    # A neighbour's row is its own owner's: never the answer for another row.
    two = [*psql[:3], " export  | 96", "(2 rows)"]
    assert ("export", "pool_size", "96") in _read(*two) and ("ingest", "pool_size", "48") in _read(
        *two
    )


def test_code_and_prose_are_no_tables():
    assert _read("def f(x):", "    return x | y", "-----+-----") == []
    assert _read("The pool size is large.", "It was 48 once.") == []
    assert _read("| a |", "---+---", "| os.dup(fd) |") == []  # not a literal


def test_a_table_is_read_for_at_most_max_rows():
    rows = [f"<tr><td>s{n}</td><td>{n}</td></tr>" for n in range(MAX_ROWS + 50)]
    assert len(_read("<tr><th>Service</th><th>Port</th></tr>", *rows)) == MAX_ROWS


@given(
    st.lists(
        st.text(max_size=80)
        | st.sampled_from(
            [
                "<name>a</name>",
                "<value>1</value>",
                "  ~ a = 1 -> 2",
                " a | b ",
                "---+---",
                "NAME   READY",
                "<tr><th>a</th><th>b</th></tr>",
            ]
        ),
        max_size=12,
    )
)
def test_no_lines_fail_the_reader(lines):
    found = read_table_values(lines)
    assert all(isinstance(v, Value) and 0 <= v.line < len(lines) for v in found)


def test_long_runs_are_read():
    # Possessive runs and a row length bound: each of these took seconds to minutes with a
    # pattern that tries every split of a run (no clock here: CI's time is the bound).
    for line in [
        " " * 100_000 + "x",
        "   " * 30_000 + "resource",
        "<td>" * 25_000,
        "~ a = " + "x" * 100_000,
        "A" * 100_000,
    ]:
        assert read_table_values([line, line]) == []
