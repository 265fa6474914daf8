"""The web inspector in a real Chromium (Debian's package, driven by Playwright).

Skipped with a reason when Chromium or Playwright is missing, unless ``TOMC_REQUIRE_BROWSER=1``
(set by ``.ci/run``), in which case a missing browser is a failure. Screenshots go to
``test-artifacts/``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tomc
from tomc.web._app import load_example
from tomc.web._server import make_server
from web_screenshot import launched_chromium

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
LAPTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}
LIMIT = tomc.MAX_INTERACTIVE_CHARS
TASK_LIMIT = tomc.MAX_TASK_CHARS


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with launched_chromium() as chromium:
        from playwright.sync_api import expect

        expect.set_options(timeout=20_000)  # a busy 2-core CI box, not a performance claim
        yield chromium


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with make_server("127.0.0.1", 0, quiet=True) as server:
        yield server.url


class Session:
    """One page plus what it did: every request URL, compile requests, JavaScript errors."""

    def __init__(self, page: Any, base_url: str) -> None:
        self.page = page
        self.base_url = base_url
        self.requests: list[str] = []
        self.errors: list[str] = []
        page.on("request", lambda request: self.requests.append(request.url))
        page.on("pageerror", lambda error: self.errors.append(str(error)))

    @property
    def compile_requests(self) -> list[str]:
        return [url for url in self.requests if url.endswith("/api/compile")]

    def shot(self, name: str) -> None:
        ARTIFACTS.mkdir(exist_ok=True)
        self.page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)

    def load_example_and_compile(self) -> None:
        from playwright.sync_api import expect

        page = self.page
        page.click("#load-example")
        expect(page.locator("#history")).to_have_value(load_example()["history"])
        page.click("#compile")
        expect(page.locator("#results")).to_be_visible()

    def unit_ids(self, selector: str) -> list[str]:
        return self.page.locator(f"#sources {selector}").evaluate_all(
            "nodes => nodes.map(n => n.dataset.id)"
        )


def _open(
    browser: Any, base_url: str, viewport: dict[str, int], **options: Any
) -> Iterator[Session]:
    from playwright.sync_api import expect

    context = browser.new_context(viewport=viewport, **options)
    page = context.new_page()
    session = Session(page, base_url)
    page.goto(base_url)
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    try:
        yield session
        # Every page must be self-contained: no CDN, no fonts or scripts from elsewhere.
        foreign = [url for url in session.requests if not url.startswith(base_url)]
        assert not foreign, foreign
        assert not session.errors, session.errors
    finally:
        context.close()


@pytest.fixture
def laptop(browser: Any, base_url: str) -> Iterator[Session]:
    yield from _open(browser, base_url, LAPTOP)


@pytest.fixture
def phone(browser: Any, base_url: str) -> Iterator[Session]:
    yield from _open(browser, base_url, PHONE, is_mobile=True, has_touch=True)


def _example_result() -> tomc.CompileResult:
    example = load_example()
    return tomc.compile_memory(
        example["history"],
        example["task"],
        budget_tokens=example["budget_tokens"],
        strategy=example["strategy"],
        counter=example["counter"],
    )


def paste(page: Any, selector: str, text: str) -> None:
    """Put a large text in a field as a paste does (one input event); ``fill`` types it slowly."""
    page.locator(selector).evaluate(
        "(node, text) => { node.value = text; node.dispatchEvent(new Event('input', "
        "{bubbles: true})); }",
        text,
    )


def _unit_id_of(line: str) -> str:
    """The unit id of a line of the example, counted here from the text itself."""
    lines = [text for text in load_example()["history"].splitlines() if text.strip()]
    return f"u{lines.index(line)}"


# ---- the proof the issue asks for ------------------------------------------------------------


def test_load_example_compile_and_see_kept_units_highlighted(laptop: Session) -> None:
    from playwright.sync_api import expect

    page = laptop.page
    laptop.load_example_and_compile()
    direct = _example_result()
    expect(page.locator("#memory")).to_have_text(direct.compiled_memory)
    expect(page.locator("#route")).to_have_text(direct.route)

    packed = [row.key for row in direct.ledger if row.kind == "source" and row.included]
    cited = {i for row in direct.included_rows if row.kind != "source" for i in row.source_ids}
    assert packed, "the example should keep some source text"
    assert laptop.unit_ids(".unit.kept") == packed
    assert set(laptop.unit_ids(".unit.record")) == cited - set(packed)
    assert laptop.unit_ids(".unit") == [unit.id for unit in direct.sources]

    # Kept units must look different, not only carry a class name.
    def background(unit_id: str) -> str:
        return page.locator(f"#unit-{unit_id}").evaluate("n => getComputedStyle(n).backgroundColor")

    omitted = laptop.unit_ids(".unit.omitted")
    assert omitted
    colours = {
        background(packed[0]),
        background(next(iter(cited - set(packed)))),
        background(omitted[0]),
    }
    assert len(colours) == 3, colours

    # Every unit shows its role slot, status and reason; the ledger has every row.
    expect(page.locator("#ledger tbody tr")).to_have_count(len(direct.ledger))
    reason = page.locator(f"#unit-{omitted[0]} .unit-meta").inner_text()
    assert reason.startswith("left out: ")
    figures = page.locator("#memory-bar-label").inner_text()
    assert f"Memory {direct.memory_tokens} of {direct.budget_tokens}" in figures
    assert page.locator("#memory-bar .seg").count() == sum(
        1 for tokens in direct.tokens_by_kind.values() if tokens > 0
    )
    laptop.shot("web-example-compiled")


def test_clicking_a_copy_row_highlights_its_whole_chain(laptop: Session) -> None:
    from playwright.sync_api import expect

    page = laptop.page
    laptop.load_example_and_compile()
    assert laptop.unit_ids(".unit.linked") == []

    page.click('#ledger tbody tr[data-kind="state"][data-key="rollback_target"] .row-select')
    chain = [
        _unit_id_of("deploy_target = staging"),
        _unit_id_of("release_target copies deploy_target"),
        _unit_id_of("rollback_target copies release_target"),
    ]
    assert laptop.unit_ids(".unit.linked") == chain
    # The later "deploy_target = production" is not part of the snapshot copy's chain.
    assert _unit_id_of("deploy_target = production") not in laptop.unit_ids(".unit.linked")
    expect(page.locator("#selection-note")).to_contain_text(
        f"rollback_target is supported by 3 units: {', '.join(chain)}"
    )
    selected = page.locator("#ledger tbody tr.selected")
    expect(selected).to_have_count(1)
    expect(selected.locator(".row-select")).to_have_attribute("aria-pressed", "true")
    # A key's underline sits below its underscores: rollback_target reads as written.
    offset, size = page.evaluate(
        """() => { const style = getComputedStyle(document.querySelector('#ledger .row-select'));
                   return [style.textUnderlineOffset, style.fontSize]; }"""
    )
    assert offset.endswith("px") and float(offset[:-2]) >= 0.25 * float(size[:-2])
    laptop.shot("web-copy-chain")

    # Another row replaces the highlight; clicking it again clears it.
    release = page.locator('#ledger tbody tr[data-kind="state"][data-key="release_target"]')
    release.locator("td.value").click()
    assert laptop.unit_ids(".unit.linked") == chain[:2]
    release.locator(".row-select").click()
    assert laptop.unit_ids(".unit.linked") == []
    expect(page.locator("#ledger tbody tr.selected")).to_have_count(0)


def test_over_the_limit_shows_the_message_and_sends_nothing(laptop: Session) -> None:
    from playwright.sync_api import expect

    page = laptop.page
    message = page.locator("#limit-message")
    line = "note = ok\n"
    at_limit = (line * (LIMIT // len(line) + 1))[:LIMIT]
    paste(page, "#history", at_limit)
    expect(page.locator("#char-count")).to_have_text("200,000 / 200,000 characters (history)")
    page.fill("#task", "Why?")  # the task has its own limit: the history still fits
    expect(message).to_be_hidden()

    paste(page, "#history", at_limit + "!")
    expect(message).to_be_visible()
    expect(message).to_contain_text("has 200,001 characters, 1 over the limit of 200,000")
    expect(message).to_contain_text("Nothing will be sent")
    expect(page.locator("#history")).to_have_attribute("aria-invalid", "true")
    laptop.shot("web-over-limit")

    page.click("#compile")
    expect(page.locator("#status")).to_have_text(
        "Nothing was sent: the input is over the character limit."
    )
    page.keyboard.press("Control+Enter")

    # The task over its own limit stops the page too.
    paste(page, "#history", "a = 1")
    expect(message).to_be_hidden()
    paste(page, "#task", "x" * (TASK_LIMIT + 1))
    expect(message).to_contain_text("The task has 10,001 characters, 1 over its limit of 10,000")
    expect(page.locator("#task")).to_have_attribute("aria-invalid", "true")
    page.click("#compile")
    assert laptop.compile_requests == []

    # Back under the limits, the same button sends.
    page.fill("#task", "a?")
    expect(message).to_be_hidden()


def test_a_pasted_chat_list_counts_its_message_text(laptop: Session) -> None:
    from playwright.sync_api import expect

    page = laptop.page
    # More than 200,000 characters of JSON, but 200,000 characters of message text: it fits,
    # as the server counts it.
    text = "z" * LIMIT
    paste(page, "#history", json.dumps([{"role": "user", "content": text, "name": "n" * 50}]))
    expect(page.locator("#char-count")).to_have_text("200,000 / 200,000 characters (message text)")
    expect(page.locator("#limit-message")).to_be_hidden()
    page.fill("#task", "z?")
    page.fill("#budget", "5")
    page.click("#compile")
    expect(page.locator("#results")).to_be_visible()
    assert len(laptop.compile_requests) == 1


def test_the_counter_counts_characters_as_the_server_does(laptop: Session) -> None:
    from playwright.sync_api import expect

    page = laptop.page
    # 100,001 emoji are 200,002 UTF-16 units but 100,001 characters for Python: not over.
    paste(page, "#history", "😀" * 100_001)
    expect(page.locator("#char-count")).to_have_text("100,001 / 200,000 characters (history)")
    expect(page.locator("#limit-message")).to_be_hidden()


def test_api_errors_are_shown_in_words(laptop: Session) -> None:
    from playwright.sync_api import expect

    page = laptop.page
    error = page.locator("#error")
    laptop.load_example_and_compile()
    page.fill("#budget", "-5")
    page.click("#compile")
    expect(error).to_be_visible()
    expect(error).to_contain_text("The compiler refused this input.")
    expect(error).to_contain_text(
        "budget_tokens must be >= 0, not -5 (HTTP 400, InvalidOptionError)"
    )
    expect(page.locator("#results")).to_be_hidden()
    laptop.shot("web-api-error")

    page.fill("#budget", "")
    page.fill("#history", json.dumps([{"content": "deploy_target = staging"}]))
    page.click("#compile")
    expect(error).to_contain_text("has no 'role' string")
    assert "Traceback" not in error.inner_text()

    page.fill("#history", "a = 1")
    page.fill("#task", "")
    page.click("#compile")
    expect(error).to_contain_text("task is empty")

    page.fill("#task", "a?")
    page.click("#compile")
    expect(page.locator("#results")).to_be_visible()
    expect(error).to_be_hidden()
    assert len(laptop.compile_requests) == 5


# ---- the rest of the page ---------------------------------------------------------------------


def test_ledger_filter(laptop: Session) -> None:
    from playwright.sync_api import expect

    page = laptop.page
    laptop.load_example_and_compile()
    ledger = _example_result().ledger
    rows = page.locator("#ledger tbody tr")

    def mentions(row: tomc.LedgerRow, needle: str) -> bool:
        fields = (row.kind, row.key, row.value, row.reason, row.text, " ".join(row.source_ids))
        return any(needle in field.lower() for field in fields)

    page.fill("#ledger-filter", "ROLLBACK")
    matching = [str(i) for i, row in enumerate(ledger) if mentions(row, "rollback")]
    assert 0 < len(matching) < len(ledger)
    expect(rows).to_have_count(len(matching))
    assert rows.evaluate_all("rs => rs.map(r => r.dataset.index)") == matching
    expect(page.locator("#ledger-count")).to_have_text(
        f"{len(matching)} of {len(ledger)} rows match."
    )

    page.fill("#ledger-filter", "")
    page.select_option("#ledger-kind", "relation")
    relations = [row for row in ledger if row.kind == "relation"]
    expect(rows).to_have_count(len(relations))
    page.select_option("#ledger-included", "yes")
    expect(rows).to_have_count(sum(1 for row in relations if row.included))
    page.select_option("#ledger-kind", "")
    expect(rows).to_have_count(sum(1 for row in ledger if row.included))
    page.select_option("#ledger-included", "no")
    expect(rows).to_have_count(sum(1 for row in ledger if not row.included))


def test_long_histories_render_a_page_at_a_time(laptop: Session) -> None:
    from playwright.sync_api import expect

    page = laptop.page
    lines = [f"chatter line {i}" for i in range(2_600)]
    lines[2_100] = "x = 41"
    lines[2_500] = "y copies x"
    paste(page, "#history", "\n".join(lines))
    page.fill("#task", "What is y?")
    page.fill("#budget", "40")
    page.click("#compile")
    expect(page.locator("#results")).to_be_visible()
    units = page.locator("#sources .unit")
    expect(units).to_have_count(1_000)
    more_units = page.locator("#more-units")
    expect(more_units).to_have_text("Show 1,000 more units (1,600 not shown)")
    rows = page.locator("#ledger tbody tr")
    expect(rows).to_have_count(1_000)
    ledger_size = page.locator("#ledger-count").inner_text().split(" of ")[1].split(" ")[0]
    expect(page.locator("#ledger-count")).to_have_text(
        f"{ledger_size} of {ledger_size} rows match; showing the first 1,000."
    )
    page.click("#more-rows")
    expect(rows).to_have_count(min(2_000, int(ledger_size.replace(",", ""))))

    # Selecting y renders the list through its supporting units, which were not shown yet.
    page.select_option("#ledger-kind", "state")
    page.click('#ledger tbody tr[data-kind="state"][data-key="y"] .row-select')
    assert laptop.unit_ids(".unit.linked") == ["u2100", "u2500"]
    expect(units).to_have_count(2_501)
    expect(more_units).to_have_text("Show 99 more units (99 not shown)")
    more_units.click()
    expect(units).to_have_count(2_600)
    expect(more_units).to_be_hidden()


def test_keyboard_only_compile_and_row_selection(laptop: Session) -> None:
    from playwright.sync_api import expect

    page = laptop.page
    page.keyboard.press("Tab")
    expect(page.locator(".skip-link")).to_be_focused()
    page.locator("#history").focus()
    page.keyboard.insert_text("A = 3\nB copies A\nA = 8\nsmall talk")
    page.keyboard.press("Tab")
    expect(page.locator("#task")).to_be_focused()
    page.keyboard.type("What is B?")
    page.keyboard.press("Control+Enter")
    expect(page.locator("#results")).to_be_visible()
    expect(page.locator("#status")).to_contain_text("Compiled:")

    button = page.locator('#ledger tbody tr[data-key="B"] .row-select')
    button.focus()
    page.keyboard.press("Enter")
    assert laptop.unit_ids(".unit.linked") == ["u0", "u1"]
    page.keyboard.press("Space")
    assert laptop.unit_ids(".unit.linked") == []
    outline = button.evaluate("n => getComputedStyle(n).outlineStyle")
    assert outline == "solid"  # the focused row control is visibly focused


def test_dropped_and_opened_files_fill_the_history(laptop: Session) -> None:
    from playwright.sync_api import expect

    page = laptop.page
    history = page.locator("#history")
    drop = page.evaluate_handle(
        """() => {
            const data = new DataTransfer();
            const file = new File(["x = 1\\n说明：测试\\n"], "dropped.txt", {type: "text/plain"});
            data.items.add(file);
            return data;
        }"""
    )
    page.dispatch_event("#history", "drop", {"dataTransfer": drop})
    expect(history).to_have_value("x = 1\n说明：测试\n")
    expect(page.locator("#status")).to_contain_text("Loaded “dropped.txt” (12 characters)")

    page.set_input_files(
        "#file-input",
        files=[
            {
                "name": "chat.json",
                "mimeType": "application/json",
                "buffer": json.dumps([{"role": "user", "content": "y = 2"}]).encode(),
            }
        ],
    )
    expect(history).to_have_value('[{"role": "user", "content": "y = 2"}]')
    page.fill("#task", "What is y?")
    page.click("#compile")
    expect(page.locator("#sources .unit-role")).to_have_text(["user"])


def test_copy_button_copies_the_memory(browser: Any, base_url: str) -> None:
    from playwright.sync_api import expect

    for session in _open(
        browser, base_url, LAPTOP, permissions=["clipboard-read", "clipboard-write"]
    ):
        page = session.page
        session.load_example_and_compile()
        page.click("#copy-memory")
        expect(page.locator("#copy-status")).to_have_text("Copied.")
        copied = page.evaluate("() => navigator.clipboard.readText()")
        assert copied == _example_result().compiled_memory


def test_cjk_history_is_shown_as_written(laptop: Session) -> None:
    from playwright.sync_api import expect

    page = laptop.page
    lines = [
        "负责人 = 东京团队",
        "担当者 copies 负责人",
        "담당 팀: 서울",
        "備考：" + "金曜日までに移行する" * 30,
    ]
    page.fill("#history", "\n".join(lines))
    page.fill("#task", "担当者は誰ですか？")
    page.click("#compile")
    expect(page.locator("#sources .unit-text")).to_have_text(lines)
    # CJK has no spaces to break at: a long line must still wrap inside its unit, not run off.
    unit = page.locator("#unit-u3")
    overflow = unit.evaluate("n => n.scrollWidth - n.clientWidth")
    assert overflow <= 0
    laptop.shot("web-cjk")


def test_phone_layout_has_no_sideways_scroll(phone: Session) -> None:
    page = phone.page
    phone.load_example_and_compile()
    page.click('#ledger tbody tr[data-kind="state"][data-key="rollback_target"] .row-select')
    widths = page.evaluate(
        "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    assert widths[0] <= widths[1], widths
    # One column: the results come after the form, not beside it.
    form = page.locator("#compile-form").bounding_box()
    results = page.locator("#results").bounding_box()
    assert form and results and results["y"] >= form["y"] + form["height"]
    # Ledger rows become cards whose cells carry their column name.
    label = page.locator("#ledger tbody tr td.kind").first.evaluate(
        "n => getComputedStyle(n, '::before').content"
    )
    assert label == '"kind"'
    phone.shot("web-phone")


# ---- before the first compile, and where the results appear --------------------------------


def test_before_the_first_compile_the_page_says_what_will_appear(laptop: Session) -> None:
    from playwright.sync_api import expect

    page = laptop.page
    placeholder = page.locator("#placeholder")
    expect(placeholder).to_be_visible()
    expect(page.locator("#results")).to_be_hidden()
    for part in ("Route and figures", "Compiled memory", "Source units", "Ledger", "Compile"):
        expect(placeholder).to_contain_text(part)
    # It fills the column the results will take, beside the form, from the top.
    form = page.locator("#compile-form").bounding_box()
    box = placeholder.bounding_box()
    assert form and box and box["x"] >= form["x"] + form["width"]
    assert abs(box["y"] - form["y"]) < 2
    laptop.shot("web-before-compile")

    laptop.load_example_and_compile()
    expect(placeholder).to_be_hidden()
    # Beside the form the results are already in view: the page does not jump.
    assert page.evaluate("() => window.scrollY") == 0
    results = page.locator("#results").bounding_box()
    assert results and abs(results["x"] - box["x"]) < 2

    page.click("#clear")
    expect(placeholder).to_be_visible()
    expect(page.locator("#results")).to_be_hidden()


def test_a_refused_compile_brings_the_placeholder_back(laptop: Session) -> None:
    from playwright.sync_api import expect

    page = laptop.page
    laptop.load_example_and_compile()
    page.fill("#budget", "-5")
    page.click("#compile")
    expect(page.locator("#error")).to_be_visible()
    expect(page.locator("#results")).to_be_hidden()
    expect(page.locator("#placeholder")).to_be_visible()


def test_on_a_phone_compile_scrolls_to_the_results(phone: Session) -> None:
    from playwright.sync_api import expect

    page = phone.page
    viewport = page.viewport_size
    assert viewport
    expect(page.locator("#placeholder")).to_be_attached()
    page.click("#load-example")
    page.locator("#compile").scroll_into_view_if_needed()
    before = page.evaluate("() => window.scrollY")
    page.click("#compile")
    expect(page.locator("#results")).to_be_visible()
    # The results start below the form, past the bottom of the screen where Compile was.
    top = page.evaluate(
        "() => document.getElementById('results').getBoundingClientRect().top + window.scrollY"
    )
    assert top > before + viewport["height"] * 0.5
    # ... and the page brings them to the top of the screen, with the focus.
    page.wait_for_function(
        "() => Math.abs(document.getElementById('results').getBoundingClientRect().top) < 2"
    )
    expect(page.locator("#route")).to_be_in_viewport()
    expect(page.locator("#memory")).to_be_in_viewport()
    assert page.evaluate("() => document.activeElement.id") == "results"
    phone.shot("web-phone-after-compile")


def test_the_readme_screenshot_is_made_from_the_live_page(browser: Any, tmp_path: Path) -> None:
    import struct

    import web_screenshot

    makefile = (Path(__file__).resolve().parents[2] / "Makefile").read_text()
    assert "tests/web_screenshot.py docs/web-inspector.png" in makefile
    shot = web_screenshot.capture(tmp_path / "web-inspector.png", browser=browser)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width == web_screenshot.VIEWPORT["width"] and height > web_screenshot.VIEWPORT["height"]
