// TOMC source inspector: plain JavaScript, no build step, no third-party code.
// Everything the server sends is inserted with textContent, never as HTML.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const els = {
    form: $("compile-form"),
    history: $("history"),
    task: $("task"),
    budget: $("budget"),
    strategy: $("strategy"),
    counter: $("counter"),
    compile: $("compile"),
    loadExample: $("load-example"),
    clear: $("clear"),
    openFile: $("open-file"),
    fileInput: $("file-input"),
    charCount: $("char-count"),
    limitMessage: $("limit-message"),
    status: $("status"),
    error: $("error"),
    results: $("results"),
    placeholder: $("placeholder"),
    summary: $("summary"),
    memoryBar: $("memory-bar"),
    memoryBarLabel: $("memory-bar-label"),
    inputBar: $("input-bar"),
    inputBarLabel: $("input-bar-label"),
    tokenLegend: $("token-legend"),
    memory: $("memory"),
    copyMemory: $("copy-memory"),
    copyStatus: $("copy-status"),
    sources: $("sources"),
    selectionNote: $("selection-note"),
    ledgerFilter: $("ledger-filter"),
    ledgerKind: $("ledger-kind"),
    ledgerIncluded: $("ledger-included"),
    ledgerCount: $("ledger-count"),
    ledgerBody: document.querySelector("#ledger tbody"),
    moreUnits: $("more-units"),
    moreRows: $("more-rows"),
  };

  const KNOWN_KINDS = ["state", "relation", "count", "source"];
  const state = {
    maxChars: 200000,
    maxTaskChars: 10000,
    result: null,
    selectedRow: null, // index into result.ledger
    linked: new Set(), // unit ids supporting the selected row
    unitPosition: new Map(), // unit id -> position in result.sources
    unitsShown: 0,
    matching: [], // ledger indexes that pass the filter
    rowsShown: 0,
    inFlight: null, // AbortController of the running compile
  };

  const fmt = (n) => Number(n).toLocaleString("en-US");

  // Python counts code points; JavaScript strings count UTF-16 units. Counting code points here
  // keeps the page's verdict identical to the server's for emoji and rare CJK characters.
  const SURROGATE_PAIR = /[\uD800-\uDBFF][\uDC00-\uDFFF]/g;
  function codePoints(text) {
    const pairs = text.match(SURROGATE_PAIR);
    return text.length - (pairs ? pairs.length : 0);
  }

  function setStatus(text) {
    els.status.textContent = text;
  }

  function clearError() {
    els.error.hidden = true;
    els.error.textContent = "";
  }

  function showError(title, detail) {
    els.error.textContent = "";
    const strong = document.createElement("strong");
    strong.textContent = title;
    els.error.append(strong);
    if (detail) {
      const p = document.createElement("span");
      p.textContent = detail;
      els.error.append(p);
    }
    els.error.hidden = false;
  }

  // ---- character limits ------------------------------------------------------------------
  // The server's rule: the history's text counts against max_chars (a pasted JSON chat list by
  // its messages' text, as the server reads it) and the task, separately, against
  // max_task_chars.
  function messageText(message) {
    const content = message.content;
    if (typeof content === "string") return content;
    if (Array.isArray(content)) {
      return content.map((part) => (typeof part === "string" ? part : String(part.text || ""))).join("\n");
    }
    return "";
  }

  function historyChars() {
    const text = els.history.value;
    const raw = codePoints(text);
    // JSON only ever adds characters around the text, so only a long list needs parsing.
    if (raw <= state.maxChars || !text.trimStart().startsWith("[")) return { used: raw, chat: false };
    let messages = null;
    try {
      messages = JSON.parse(text);
    } catch (_) {
      return { used: raw, chat: false };
    }
    const isChat = Array.isArray(messages) && messages.length > 0 &&
      messages.every((m) => m !== null && typeof m === "object" && !Array.isArray(m));
    if (!isChat) return { used: raw, chat: false };
    return { used: messages.reduce((sum, m) => sum + codePoints(messageText(m)), 0), chat: true };
  }

  function updateCounter() {
    const history = historyChars();
    const task = codePoints(els.task.value);
    const historyOver = history.used > state.maxChars;
    const taskOver = task > state.maxTaskChars;
    els.charCount.textContent =
      `${fmt(history.used)} / ${fmt(state.maxChars)} characters ` +
      (history.chat ? "(message text)" : "(history)");
    els.charCount.classList.toggle("over", historyOver);
    els.history.setAttribute("aria-invalid", historyOver ? "true" : "false");
    els.task.setAttribute("aria-invalid", taskOver ? "true" : "false");
    const problems = [];
    if (historyOver) {
      problems.push(
        `Too long to compile here: the history has ${fmt(history.used)} characters, ` +
        `${fmt(history.used - state.maxChars)} over the limit of ${fmt(state.maxChars)}. ` +
        "Nothing will be sent until it fits: shorten or split the history " +
        "(tomc.compile_memory() in Python has no limit).",
      );
    }
    if (taskOver) {
      problems.push(
        `The task has ${fmt(task)} characters, ${fmt(task - state.maxTaskChars)} over its ` +
        `limit of ${fmt(state.maxTaskChars)}. Nothing will be sent until it is shorter.`,
      );
    }
    els.limitMessage.textContent = problems.join(" ");
    els.limitMessage.hidden = problems.length === 0;
    return problems.length === 0;
  }

  // ---- options, example, files -----------------------------------------------------------
  function fillSelect(select, values, chosen) {
    const current = select.value || chosen;
    select.textContent = "";
    for (const value of values) {
      const option = document.createElement("option");
      option.value = value;
      option.textContent = value;
      select.append(option);
    }
    select.value = values.includes(current) ? current : chosen;
  }

  async function getJson(url) {
    const response = await fetch(url, { headers: { Accept: "application/json" } });
    const data = await response.json();
    if (!response.ok) {
      throw new Error(data && data.error ? data.error.message : `HTTP ${response.status}`);
    }
    return data;
  }

  async function loadOptions() {
    try {
      const options = await getJson("api/options");
      state.maxChars = options.max_chars;
      if (options.max_task_chars) state.maxTaskChars = options.max_task_chars;
      fillSelect(els.strategy, options.strategies, options.default_strategy);
      fillSelect(els.counter, options.counters, options.default_counter);
      document.body.dataset.ready = "true";
    } catch (err) {
      showError("Could not read the server's options.", describeFetchError(err));
    }
    updateCounter();
  }

  async function loadExample() {
    clearError();
    try {
      const example = await getJson("api/example");
      els.history.value = example.history;
      els.task.value = example.task;
      els.budget.value = example.budget_tokens === null ? "" : String(example.budget_tokens);
      els.strategy.value = example.strategy;
      els.counter.value = example.counter;
      updateCounter();
      setStatus(`Loaded the example “${example.name}”. Press Compile.`);
    } catch (err) {
      showError("Could not load the example.", describeFetchError(err));
    }
  }

  async function loadFile(file) {
    clearError();
    // UTF-8 spends at most 4 bytes on a character, so a bigger file cannot fit: refuse it
    // before reading megabytes into the text area.
    if (file.size > state.maxChars * 4) {
      els.limitMessage.textContent =
        `The file “${file.name}” has ${fmt(file.size)} bytes, far over the limit of ` +
        `${fmt(state.maxChars)} characters. Nothing was loaded and nothing will be sent.`;
      els.limitMessage.hidden = false;
      return;
    }
    try {
      els.history.value = await file.text();
    } catch (err) {
      showError(`Could not read “${file.name}”.`, String(err && err.message ? err.message : err));
      return;
    }
    updateCounter();
    setStatus(`Loaded “${file.name}” (${fmt(codePoints(els.history.value))} characters).`);
  }

  // ---- compile ---------------------------------------------------------------------------
  function describeFetchError(err) {
    if (err && err.name === "TypeError") {
      return "The TOMC server did not answer. Is `tomc serve` still running?";
    }
    return String(err && err.message ? err.message : err);
  }

  function requestBody() {
    const budgetText = els.budget.value.trim();
    return {
      history: els.history.value,
      task: els.task.value,
      // An empty box means "library default"; anything else goes to the server, which
      // explains in words what is wrong with it (negative, fractional, ...).
      budget_tokens: budgetText === "" ? null : Number(budgetText),
      strategy: els.strategy.value,
      counter: els.counter.value,
    };
  }

  async function compile() {
    clearError();
    if (els.budget.validity && els.budget.validity.badInput) {
      showError("The budget is not a number.", "Enter a whole number of tokens, or leave it empty.");
      els.budget.focus();
      return;
    }
    if (!updateCounter()) {
      setStatus("Nothing was sent: the input is over the character limit.");
      els.history.focus();
      return;
    }
    if (state.inFlight) state.inFlight.abort();
    const controller = new AbortController();
    state.inFlight = controller;
    els.compile.disabled = true;
    els.form.setAttribute("aria-busy", "true");
    setStatus("Compiling…");
    const started = performance.now();
    try {
      const response = await fetch("api/compile", {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "application/json" },
        body: JSON.stringify(requestBody()),
        signal: controller.signal,
      });
      const roundTrip = performance.now() - started;
      let data = null;
      try {
        data = await response.json();
      } catch (_) {
        data = null;
      }
      if (!response.ok) {
        const message =
          data && data.error && data.error.message
            ? data.error.message
            : `The server answered HTTP ${response.status} without an explanation.`;
        const kind = data && data.error && data.error.type ? `, ${data.error.type}` : "";
        showError(
          "The compiler refused this input.",
          `${message} (HTTP ${response.status}${kind})`,
        );
        setStatus("");
        showResults(false);
        return;
      }
      if (!data) {
        showError("The server's answer could not be read.", "It was not JSON.");
        setStatus("");
        return;
      }
      render(data, roundTrip);
    } catch (err) {
      if (err && err.name === "AbortError") return; // superseded by a newer compile
      showError("Could not compile.", describeFetchError(err));
      setStatus("");
    } finally {
      if (state.inFlight === controller) {
        state.inFlight = null;
        els.compile.disabled = false;
        els.form.removeAttribute("aria-busy");
      }
    }
  }

  // ---- rendering -------------------------------------------------------------------------
  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function render(result, roundTrip) {
    state.result = result;
    state.selectedRow = null;
    renderSummary(result, roundTrip);
    renderTokens(result);
    els.memory.textContent = result.compiled_memory || "(empty: nothing fitted the budget)";
    els.copyStatus.textContent = "";
    state.linked = new Set();
    state.unitPosition = new Map(result.sources.map((unit, i) => [unit.id, i]));
    renderSources();
    renderKindOptions(result.ledger);
    renderLedger();
    els.selectionNote.textContent =
      "Select a ledger row to highlight the source units that support it.";
    showResults(true);
    document.body.dataset.compiled = String(Number(document.body.dataset.compiled || 0) + 1);
    const kept = result.sources.filter((u) => u.status !== "omitted").length;
    setStatus(
      `Compiled: ${fmt(result.memory_tokens)} of ${fmt(result.budget_tokens)} budget tokens; ` +
        `${fmt(kept)} of ${fmt(result.sources.length)} source units kept.`,
    );
    revealResults();
  }

  // The results replace the placeholder that says what they will hold.
  function showResults(visible) {
    els.results.hidden = !visible;
    els.placeholder.hidden = visible;
  }

  // In one column (a phone, a narrow window) the results sit below the form, usually below the
  // fold: bring them into view and move focus there. Beside the form they are already visible.
  function revealResults() {
    const form = els.form.getBoundingClientRect();
    const results = els.results.getBoundingClientRect();
    if (results.top < form.bottom - 1) return; // two columns
    if (results.top >= 0 && results.top < window.innerHeight / 2) return; // already in view
    const reduced = window.matchMedia("(prefers-reduced-motion: reduce)").matches;
    els.results.scrollIntoView({ behavior: reduced ? "auto" : "smooth", block: "start" });
    els.results.focus({ preventScroll: true });
  }

  function renderSummary(result, roundTrip) {
    const strategy =
      result.applied_strategy && result.applied_strategy !== result.strategy
        ? `${result.strategy} → ${result.applied_strategy}`
        : result.strategy;
    const capped = Object.entries(result.caps_exceeded || {})
      .filter(([, exceeded]) => exceeded)
      .map(([kind]) => kind);
    const rows = [
      ["Route", result.route],
      ["Why", result.route_reason],
      ["Strategy", strategy],
      ["Counter", result.counter],
      ["History", result.input && result.input.format === "messages" ? "chat messages" : "plain lines"],
      ["Latency", `${(result.latency_s * 1000).toFixed(1)} ms compile · ${Math.round(roundTrip)} ms round trip`],
    ];
    if (capped.length) rows.push(["Caps exceeded", capped.join(", ")]);
    els.summary.textContent = "";
    for (const [term, value] of rows) {
      els.summary.append(el("dt", null, term), el("dd", null, value));
      if (term === "Route") els.summary.lastChild.id = "route";
    }
  }

  function renderTokens(result) {
    const budget = Math.max(result.budget_tokens || 0, 1);
    const scale = Math.max(budget, result.memory_tokens || 0);
    const byKind = result.tokens_by_kind || {};
    els.memoryBar.textContent = "";
    els.tokenLegend.textContent = "";
    const kinds = Object.keys(byKind).sort(
      (a, b) => kindOrder(a) - kindOrder(b) || a.localeCompare(b),
    );
    for (const kind of kinds) {
      const tokens = byKind[kind];
      const cls = KNOWN_KINDS.includes(kind) ? kind : "other";
      if (tokens > 0) {
        const seg = el("span", `seg seg-${cls}`);
        seg.style.width = `${(100 * tokens) / scale}%`;
        seg.title = `${kind}: ${fmt(tokens)} tokens`;
        els.memoryBar.append(seg);
      }
      const item = el("li");
      item.append(el("span", `dot dot-${cls}`), `${kind} ${fmt(tokens)}`);
      els.tokenLegend.append(item);
    }
    const memoryText =
      `Memory ${fmt(result.memory_tokens)} of ${fmt(result.budget_tokens)} budget tokens`;
    els.memoryBarLabel.textContent = memoryText;
    els.memoryBar.setAttribute(
      "aria-label",
      `${memoryText}: ` + kinds.map((k) => `${k} ${fmt(byKind[k])}`).join(", "),
    );
    const input = Math.max(result.input_tokens || 0, 1);
    const share = Math.min(100, (100 * result.budget_tokens) / input);
    const inputText =
      result.budget_tokens >= result.input_tokens
        ? `Input ${fmt(result.input_tokens)} tokens; the budget covers all of it`
        : `Input ${fmt(result.input_tokens)} tokens; the budget is ` +
          `${share >= 10 ? share.toFixed(0) : share.toFixed(1)}% of it`;
    els.inputBarLabel.textContent = inputText;
    els.inputBar.textContent = "";
    const seg = el("span", "seg seg-budget");
    seg.style.width = `${share}%`;
    els.inputBar.append(seg);
    els.inputBar.setAttribute("aria-label", inputText);
  }

  function kindOrder(kind) {
    const i = KNOWN_KINDS.indexOf(kind);
    return i === -1 ? KNOWN_KINDS.length : i;
  }

  const STATUS_LABEL = { kept: "kept", record: "in a record", omitted: "left out" };
  // A 200,000-character history can have tens of thousands of one-word lines. Building a list
  // item and a table row for each at once freezes the page for many seconds, so both lists
  // render a page at a time; the filter and "show more" reach the rest.
  const PAGE = 1000;

  function unitItem(unit) {
    const li = el("li", `unit ${unit.status}`);
    li.id = `unit-${unit.id}`;
    li.dataset.id = unit.id;
    li.dataset.status = unit.status;
    if (state.linked.has(unit.id)) li.classList.add("linked");
    li.append(el("span", "unit-id", unit.id));
    li.append(el("span", "unit-text", unit.text));
    const meta = el("span", "unit-meta");
    if (unit.role) meta.append(el("span", "unit-role", unit.role));
    meta.append(`${STATUS_LABEL[unit.status] || unit.status}: ${unit.reason}`);
    li.append(meta);
    return li;
  }

  function renderSources() {
    els.sources.textContent = "";
    state.unitsShown = 0;
    showUnitsThrough(PAGE - 1);
  }

  // Render units up to and including position `last` (0-based), in order.
  function showUnitsThrough(last) {
    const units = state.result.sources;
    const end = Math.min(units.length, last + 1);
    if (end > state.unitsShown) {
      const frag = document.createDocumentFragment();
      for (let i = state.unitsShown; i < end; i += 1) frag.append(unitItem(units[i]));
      els.sources.append(frag);
      state.unitsShown = end;
    }
    const hidden = units.length - state.unitsShown;
    els.moreUnits.hidden = hidden === 0;
    els.moreUnits.textContent =
      `Show ${fmt(Math.min(PAGE, hidden))} more units (${fmt(hidden)} not shown)`;
  }

  function renderKindOptions(ledger) {
    const kinds = [...new Set(ledger.map((row) => row.kind))].sort(
      (a, b) => kindOrder(a) - kindOrder(b) || a.localeCompare(b),
    );
    fillSelect(els.ledgerKind, ["", ...kinds], "");
    els.ledgerKind.options[0].textContent = "all";
  }

  // data-label names the column when a phone shows each row as a card.
  function cell(className, label, text) {
    const td = el("td", className, text);
    td.dataset.label = label;
    return td;
  }

  function rowMatches(row, needle, kind, included) {
    if (kind && row.kind !== kind) return false;
    if (included === "yes" && !row.included) return false;
    if (included === "no" && row.included) return false;
    if (!needle) return true;
    const hay = `${row.kind}\n${row.key}\n${row.value}\n${row.reason}\n${row.text}\n${row.source_ids.join(" ")}`;
    return hay.toLowerCase().includes(needle);
  }

  function ledgerRow(row, index) {
    const tr = el("tr", row.included ? "included" : "excluded");
    tr.dataset.index = String(index);
    tr.dataset.kind = row.kind;
    tr.dataset.key = row.key;
    const selected = index === state.selectedRow;
    if (selected) tr.classList.add("selected");
    tr.append(cell("kind", "kind", row.kind));
    const keyCell = cell("key", "key");
    const button = el("button", "row-select", row.key);
    button.type = "button";
    button.setAttribute("aria-pressed", selected ? "true" : "false");
    button.title = row.text;
    keyCell.append(button);
    tr.append(keyCell);
    tr.append(cell("value", "value", row.value));
    tr.append(cell("num", "tokens", fmt(row.tokens)));
    tr.append(cell("inc", "included", row.included ? "yes" : "no"));
    tr.append(cell("reason", "reason", row.reason));
    return tr;
  }

  function renderLedger() {
    const result = state.result;
    if (!result) return;
    const needle = els.ledgerFilter.value.trim().toLowerCase();
    const kind = els.ledgerKind.value;
    const included = els.ledgerIncluded.value;
    state.matching = [];
    result.ledger.forEach((row, index) => {
      if (rowMatches(row, needle, kind, included)) state.matching.push(index);
    });
    els.ledgerBody.textContent = "";
    state.rowsShown = 0;
    showMoreRows();
  }

  function showMoreRows() {
    const ledger = state.result.ledger;
    const end = Math.min(state.matching.length, state.rowsShown + PAGE);
    const frag = document.createDocumentFragment();
    for (let i = state.rowsShown; i < end; i += 1) {
      const index = state.matching[i];
      frag.append(ledgerRow(ledger[index], index));
    }
    els.ledgerBody.append(frag);
    state.rowsShown = end;
    const matched = state.matching.length;
    const hidden = matched - end;
    els.ledgerCount.textContent =
      `${fmt(matched)} of ${fmt(ledger.length)} rows match` +
      (hidden ? `; showing the first ${fmt(end)}.` : ".");
    els.moreRows.hidden = hidden === 0;
    els.moreRows.textContent = `Show ${fmt(Math.min(PAGE, hidden))} more rows`;
  }

  function selectRow(index) {
    const result = state.result;
    if (!result) return;
    state.selectedRow = state.selectedRow === index ? null : index;
    for (const tr of els.ledgerBody.querySelectorAll("tr")) {
      const on = Number(tr.dataset.index) === state.selectedRow;
      tr.classList.toggle("selected", on);
      tr.querySelector(".row-select").setAttribute("aria-pressed", on ? "true" : "false");
    }
    for (const li of els.sources.querySelectorAll(".unit.linked")) li.classList.remove("linked");
    state.linked = new Set();
    if (state.selectedRow === null) {
      els.selectionNote.textContent =
        "Select a ledger row to highlight the source units that support it.";
      return;
    }
    const row = result.ledger[state.selectedRow];
    const ids = row.source_ids;
    state.linked = new Set(ids);
    // A supporting unit may lie beyond the units rendered so far: render through it.
    let last = -1;
    for (const id of ids) last = Math.max(last, state.unitPosition.get(id) ?? -1);
    showUnitsThrough(last);
    let first = null;
    for (const id of ids) {
      const li = document.getElementById(`unit-${id}`);
      if (!li) continue;
      li.classList.add("linked");
      if (!first) first = li;
    }
    els.selectionNote.textContent = ids.length
      ? `${row.kind} ${row.key} is supported by ${ids.length === 1 ? "unit" : `${ids.length} units`}: ${ids.join(", ")}.`
      : `${row.kind} ${row.key} cites no source unit.`;
    if (first) {
      // Scroll only the unit list: moving the whole page would lose the row just clicked.
      const list = els.sources;
      const top = first.offsetTop - list.offsetTop;
      if (top < list.scrollTop || top + first.offsetHeight > list.scrollTop + list.clientHeight) {
        list.scrollTop = Math.max(0, top - 8);
      }
    }
  }

  async function copyMemory() {
    const text = state.result ? state.result.compiled_memory : "";
    try {
      await navigator.clipboard.writeText(text);
      els.copyStatus.textContent = "Copied.";
    } catch (_) {
      // The async clipboard can be refused (permissions, insecure origin): select instead.
      const range = document.createRange();
      range.selectNodeContents(els.memory);
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      const ok = document.execCommand && document.execCommand("copy");
      els.copyStatus.textContent = ok ? "Copied." : "Selected: press Ctrl+C to copy.";
    }
  }

  // ---- wiring ----------------------------------------------------------------------------
  els.form.addEventListener("submit", (event) => {
    event.preventDefault();
    compile();
  });
  els.form.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      compile();
    }
  });
  els.history.addEventListener("input", updateCounter);
  els.task.addEventListener("input", updateCounter);
  els.loadExample.addEventListener("click", loadExample);
  els.clear.addEventListener("click", () => {
    els.history.value = "";
    els.task.value = "";
    els.budget.value = "";
    showResults(false);
    state.result = null;
    clearError();
    updateCounter();
    setStatus("Cleared.");
    els.history.focus();
  });
  els.openFile.addEventListener("click", () => els.fileInput.click());
  els.fileInput.addEventListener("change", () => {
    if (els.fileInput.files && els.fileInput.files[0]) loadFile(els.fileInput.files[0]);
    els.fileInput.value = "";
  });
  els.history.addEventListener("dragover", (event) => {
    if (event.dataTransfer && [...event.dataTransfer.types].includes("Files")) {
      event.preventDefault();
      els.history.classList.add("drag-over");
    }
  });
  els.history.addEventListener("dragleave", () => els.history.classList.remove("drag-over"));
  els.history.addEventListener("drop", (event) => {
    els.history.classList.remove("drag-over");
    const files = event.dataTransfer && event.dataTransfer.files;
    if (files && files.length) {
      event.preventDefault();
      loadFile(files[0]);
    }
  });
  els.copyMemory.addEventListener("click", copyMemory);
  els.ledgerBody.addEventListener("click", (event) => {
    const tr = event.target.closest("tr");
    if (tr && tr.dataset.index !== undefined) selectRow(Number(tr.dataset.index));
  });
  els.moreUnits.addEventListener("click", () => showUnitsThrough(state.unitsShown + PAGE - 1));
  els.moreRows.addEventListener("click", showMoreRows);
  els.ledgerFilter.addEventListener("input", renderLedger);
  els.ledgerKind.addEventListener("change", renderLedger);
  els.ledgerIncluded.addEventListener("change", renderLedger);

  loadOptions();
})();
