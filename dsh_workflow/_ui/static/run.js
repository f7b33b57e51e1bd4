// A run page: the server renders its first paint (the tree of phases and agents, the counts,
// the log, as the stored events left them); this script takes those rows over and applies the
// events that follow (sent by the server as server-sent events, after the last one rendered)
// to the tree, a timeline chart and the log, without reloading. A phase gets its table with
// its first agent. Clicking an agent opens its detail (what it was asked and answered, long
// texts in bounded pieces); the Cancel button asks the run's process to cancel it. DOM work is
// batched: events only mark agents dirty; one render per animation frame touches those rows,
// and the chart is redrawn at most twice a second while the run is going.
// #run[data-live] reads "open" while the stream is open and "ended" once the run has ended
// and its final state (tree, counts, chart, result) is drawn.
"use strict";
(function () {
  const root = document.getElementById("run");
  const runId = root.dataset.id;
  const COLORS = { completed: "#2e9d5b", failed: "#d64545", timeout: "#e08a1e",
                   cancelled: "#8b95a5", interrupted: "#5b6472", running: "#3b82f6",
                   replayed: "#8b5cf6" };
  const NO_PHASE = "(no phase)";
  const REASON_CHARS = 160;
  const defaultModel = root.dataset.defaultModel || null;

  const agents = new Map();        // seq -> agent
  const phases = new Map();        // title -> {title, el, body, counts, agents: []}
  const running = new Set();       // seqs of agents still going
  const dirty = new Set();         // seqs whose row needs drawing
  const dirtyPhases = new Set();
  const pendingLog = [];
  let startAt = Number(root.dataset.created);
  let endAt = root.dataset.ended ? Number(root.dataset.ended) : null;
  let tokens = Number($id("token-count").textContent) || 0;
  let replayed = Number($id("replayed-count").textContent) || 0;
  // the known costs' sum (null: none known yet) and the children without one, as first painted
  let cost = $id("cost-count").dataset.cost ? Number($id("cost-count").dataset.cost) : null;
  let unpriced = Number($id("cost-count").dataset.unpriced) || 0;
  let framePending = false, chartDirty = false, lastChart = 0, chartTimer = null;
  let ended = false;

  function $id(id) { return document.getElementById(id); }
  const $ = $id;
  const secs = (s) => (s < 1 ? (Math.max(s, 0) * 1000).toFixed(0) + " ms"
                      : s < 60 ? s.toFixed(1) + " s"
                      : Math.floor(s / 60) + " min " + String(Math.floor(s % 60)).padStart(2, "0") + " s");
  const now = () => Date.now() / 1000;

  function adoptPhase(el) {
    const phase = { title: el.dataset.phase, el, body: el.querySelector("tbody"),
                    counts: el.querySelector(".counts"), agents: [] };
    phases.set(phase.title, phase);
    return phase;
  }

  function phaseOf(title) {
    const key = title || NO_PHASE;
    let phase = phases.get(key);
    if (!phase) {
      const el = $("phase-template").content.firstElementChild.cloneNode(true);
      el.dataset.phase = key;
      el.querySelector(".title").textContent = key;
      phase = adoptPhase(el);
      const empty = $("tree-empty");
      if (empty) empty.remove();
      $("tree").appendChild(el);
    }
    return phase;
  }

  // The rows the server rendered become the agents this script keeps up to date.
  function hydrate() {
    for (const el of document.querySelectorAll("#tree details.phase")) {
      const phase = adoptPhase(el);
      for (const row of el.querySelectorAll("tr.agent")) {
        const d = row.dataset;
        const a = { seq: Number(d.seq), label: row.cells[1].textContent, phase: phase.title,
                    status: d.status, start: Number(d.start),
                    end: d.end ? Number(d.end) : null,
                    tokens: d.tokens ? Number(d.tokens) : null, model: d.model || null,
                    replayed: row.classList.contains("replayed"), reason: d.reason || "", row };
        agents.set(a.seq, a);
        phase.agents.push(a);
        if (a.status === "running") running.add(a.seq);
      }
    }
    chartDirty = agents.size > 0;
  }

  function reasonText(error) {
    if (!error) return "";
    if (typeof error !== "object") return String(error);
    let text = String(error.message || "").split(/\s+/).filter(Boolean).join(" ");
    if (Array.isArray(error.details) && error.details.length) {
      text += " (" + error.details.slice(0, 5).map((d) => String(d)).join("; ") + ")";
    }
    return error.kind ? error.kind + ": " + text : text;
  }

  function apply(event) {
    const d = event.data;
    switch (d.event) {
      case "WorkflowStarted": startAt = event.at; break;
      case "PhaseStarted": break;  // a phase appears with its first agent
      case "LogEmitted": pendingLog.push(event); break;
      case "AgentStarted": {
        const a = { seq: d.seq, label: d.label, phase: d.phase || NO_PHASE, status: "running",
                    start: event.at, end: null, tokens: null, model: d.model || defaultModel,
                    replayed: false, reason: "", row: null };
        agents.set(d.seq, a); running.add(d.seq); touch(a); break;
      }
      case "AgentEnded": {
        const a = agents.get(d.seq);
        if (!a) break;
        a.status = d.outcome; a.end = event.at;
        a.tokens = d.usage ? d.usage.input_tokens + d.usage.output_tokens : null;
        a.reason = d.outcome === "completed" ? "" : reasonText(d.error);
        tokens += a.tokens || 0;
        if (d.usage && typeof d.usage.cost_usd === "number") cost = (cost || 0) + d.usage.cost_usd;
        else if (a.tokens) unpriced += 1;
        running.delete(d.seq); touch(a); break;
      }
      case "AgentReplayed": {
        const a = { seq: d.seq, label: d.label, phase: d.phase || NO_PHASE, status: "replayed",
                    start: event.at, end: event.at, tokens: null, model: d.model || defaultModel,
                    replayed: true, reason: "", row: null };
        agents.set(d.seq, a); replayed += 1; touch(a); break;
      }
      case "WorkflowEnded": endAt = event.at; break;
      case "QuestionAsked": case "QuestionAnswered": {
        // The questions are drawn by the server: say so when they change under the page.
        const changed = $("questions-changed");
        if (changed) { changed.hidden = false; $("questions").hidden = false; }
        break;
      }
    }
  }

  function touch(agent) {
    dirty.add(agent.seq);
    dirtyPhases.add(agent.phase);
    chartDirty = true;
  }

  function schedule() {
    if (!framePending) { framePending = true; requestAnimationFrame(render); }
  }

  function cellsFor(a) {
    const t = now();
    const elapsed = (a.end ?? (endAt ?? t)) - a.start;
    const reason = a.reason.length > REASON_CHARS ? a.reason.slice(0, REASON_CHARS - 1) + "…"
      : a.reason;
    return [String(a.seq), a.label, a.status, a.model || "—",
            a.tokens == null ? "—" : String(a.tokens), a.replayed ? "—" : secs(elapsed), reason];
  }

  function drawRow(a) {
    const phase = phaseOf(a.phase);
    if (!a.row) {
      a.row = document.createElement("tr");
      a.row.className = "agent";
      a.row.dataset.seq = a.seq;
      for (let i = 0; i < 7; i++) a.row.appendChild(document.createElement("td"));
      a.row.cells[1].className = "label";
      a.row.cells[3].className = "model";
      a.row.cells[4].className = a.row.cells[5].className = "num";
      a.row.cells[6].className = "reason";
      phase.agents.push(a);
      phase.body.appendChild(a.row);
    }
    const cells = cellsFor(a);
    for (let i = 0; i < 7; i++) {
      if (i !== 2 && a.row.cells[i].textContent !== cells[i]) a.row.cells[i].textContent = cells[i];
    }
    if (a.row.cells[6].title !== a.reason) a.row.cells[6].title = a.reason;
    if (a.row.dataset.status !== a.status) {
      const badge = document.createElement("span");
      badge.className = "badge s-" + a.status;
      badge.textContent = a.status;
      a.row.cells[2].replaceChildren(badge);
      a.row.dataset.status = a.status;
      a.row.classList.toggle("replayed", a.replayed);
    }
  }

  function render() {
    framePending = false;
    for (const seq of dirty) drawRow(agents.get(seq));
    dirty.clear();
    for (const title of dirtyPhases) {
      const phase = phases.get(title);
      if (!phase) continue;
      const by = {};
      for (const a of phase.agents) by[a.status] = (by[a.status] || 0) + 1;
      phase.counts.textContent = Object.entries(by).map(([k, v]) => v + " " + k).join(" · ");
    }
    dirtyPhases.clear();
    if (pendingLog.length) {
      const frag = document.createDocumentFragment();
      for (const event of pendingLog.splice(0)) {
        const li = document.createElement("li");
        const at = document.createElement("span");
        at.className = "at";
        at.textContent = "+" + secs(event.at - startAt);
        li.append(at, document.createTextNode(event.data.message));
        frag.appendChild(li);
      }
      $("log").appendChild(frag);
    }
    $("agent-count").textContent = String(agents.size - replayed);
    $("replayed-count").textContent = String(replayed);
    let failed = 0, cancelled = 0;
    for (const a of agents.values()) {
      if (a.status === "cancelled") cancelled++;
      else if (a.status !== "completed" && a.status !== "running" && a.status !== "replayed"
               && a.status !== "interrupted") failed++;
    }
    $("failed-count").textContent = String(failed);
    $("cancelled-count").textContent = String(cancelled);
    $("token-count").textContent = String(tokens);
    // spend that could not be priced reads "unpriced", never $0.0000 (as _prices.cost_text)
    $("cost-count").textContent = cost === null ? (unpriced ? "unpriced" : "—")
      : "$" + (cost >= 1 ? cost.toFixed(2) : cost.toFixed(4)) + (unpriced ? "+" : "");
    if (!ended) $("run-duration").textContent = secs((endAt ?? now()) - startAt);
    if (chartDirty) planChart();
    settle();
  }

  function planChart() {
    if (ended && chartTimer !== null) { clearTimeout(chartTimer); chartTimer = null; }
    const wait = ended ? 0 : Math.max(0, 500 - (Date.now() - lastChart));
    if (chartTimer === null) chartTimer = setTimeout(drawChart, wait);
  }

  let chart = null;

  function drawChart() {
    chartTimer = null;
    if (typeof Chart === "undefined") { chartTimer = setTimeout(drawChart, 50); return; }
    chartDirty = false;
    lastChart = Date.now();
    const t = endAt ?? now();
    const ordered = Array.from(agents.values()).sort((p, q) => p.seq - q.seq);
    const names = ordered.map((a) => "#" + a.seq + " " + a.label);
    const bars = {};
    const marks = [];
    ordered.forEach((a, i) => {
      if (a.replayed) { marks.push({ x: a.start - startAt, y: names[i], agent: a }); return; }
      (bars[a.status] || (bars[a.status] = [])).push(
        { x: [a.start - startAt, Math.max(a.end ?? t, a.start) - startAt], y: names[i], agent: a });
    });
    const datasets = Object.keys(bars).sort().map((status) => ({
      type: "bar", label: status, data: bars[status], backgroundColor: COLORS[status] || "#999",
      grouped: false, barPercentage: 0.8, categoryPercentage: 1, minBarLength: 2,
      maxBarThickness: 18,
    }));
    if (marks.length) {
      datasets.push({ type: "scatter", label: "replayed", data: marks, pointStyle: "rectRot",
                      radius: 5, backgroundColor: COLORS.replayed, borderColor: COLORS.replayed });
    }
    const n = names.length;
    const box = $("timeline");
    box.style.height = Math.min(900, 90 + Math.max(n, 3) * (n > 60 ? 8 : 22)) + "px";
    if (chart === null) {
      chart = new Chart($("timeline-canvas"), {
        type: "bar",
        data: { labels: names, datasets },
        options: {
          indexAxis: "y", animation: false, responsive: true, maintainAspectRatio: false,
          parsing: { xAxisKey: "x", yAxisKey: "y" },
          scales: {
            x: { type: "linear", min: 0, title: { display: true, text: "seconds since the run started" } },
            y: { type: "category", ticks: { autoSkip: false } },
          },
          plugins: {
            legend: { position: "top", align: "start" },
            tooltip: { callbacks: { label: (item) => describe(item.raw.agent) } },
          },
        },
      });
    } else {
      chart.data.labels = names;
      chart.data.datasets = datasets;
    }
    chart.options.scales.y.ticks.display = n <= 60;
    chart.options.scales.y.grid.display = n <= 60;
    chart.update("none");
    box.dataset.bars = String(n);
    if (chartDirty) planChart();
    settle();
  }

  function settle() {
    // Once the run has ended and nothing is left to draw, the page shows its final state.
    if (ended && !framePending && !dirty.size && !chartDirty && chartTimer === null) {
      root.dataset.live = "ended";
    }
  }

  function describe(a) {
    const where = a.phase === NO_PHASE ? "" : " · " + a.phase;
    if (a.replayed) return "replayed at +" + secs(a.start - startAt) + where;
    const end = a.end ?? (endAt ?? now());
    const line = a.status + where + " · +" + secs(a.start - startAt) + " for " + secs(end - a.start);
    return a.reason ? [line, a.reason.length > 300 ? a.reason.slice(0, 299) + "…" : a.reason] : line;
  }

  function tick() {
    if (ended) return;
    for (const seq of running) dirty.add(seq);
    if (running.size) chartDirty = true;
    schedule();
  }

  function finish(payload) {
    ended = true;
    const stop = $("cancel-run");
    if (stop) stop.remove();
    if (payload.status === "cancelled" && $("cancel-note").textContent) {
      $("cancel-note").textContent = "cancelled";
    }
    root.dataset.status = payload.status;
    const badge = $("run-status");
    badge.textContent = payload.status;
    badge.className = "badge s-" + payload.status;
    $("run-duration").textContent = payload.row.duration;
    if (payload.error) {
      $("error-code").textContent = payload.error.code || "";
      $("error-message").textContent = payload.error.message;
      $("error-box").hidden = false;
    }
    if (payload.value) showBlock("result", payload.value);
    if (payload.result) showBlock("result-full", payload.result);
    if (payload.warnings && payload.warnings.length) {
      const list = $("warnings");
      list.textContent = "";
      for (const text of payload.warnings) {
        const item = document.createElement("li");
        item.textContent = text;
        list.appendChild(item);
      }
      $("warnings-box").hidden = false;
    }
    if (payload.ended_at && endAt === null) endAt = payload.ended_at;
    // Agents with no end left: the run's process died under them (an interrupted run).
    for (const seq of running) {
      const a = agents.get(seq);
      a.status = "interrupted";
      a.end = endAt ?? a.start;
      dirty.add(seq);
      dirtyPhases.add(a.phase);
    }
    running.clear();
    chartDirty = true;
    schedule();  // the chart drawn after this render marks the page data-live="ended"
  }

  // A folded block (a value past the server's bound) shows its first characters; "Show more"
  // fetches the next chunk of its text, one request at a time.
  function foldOf(id) { return document.querySelector('p.folded[data-for="' + id + '"]'); }
  function showBlock(id, part) {
    $(id).innerHTML = part.html;
    const fold = foldOf(id);
    if (!fold) return;
    fold.dataset.next = String(part.shown);
    fold.querySelector(".fold-shown").textContent = String(part.shown);
    fold.querySelector(".fold-total").textContent = "";
    fold.hidden = !part.folded;
  }
  async function showMore(fold, button) {
    button.disabled = true;
    try {
      const next = Number(fold.dataset.next);
      const response = await fetch("/api/runs/" + encodeURIComponent(runId) + "/text/" +
                                   fold.dataset.part + "?offset=" + next);
      if (!response.ok) return;
      const text = await response.text();
      const total = Number(response.headers.get("X-Total-Chars"));
      const block = $(fold.dataset.for);
      let more = block.querySelector("pre");  // the highlighted part's: the text goes on in it
      if (!more) {
        more = document.createElement("pre");
        block.appendChild(more);
      }
      more.appendChild(document.createTextNode(text));
      const upTo = next + text.length;
      fold.dataset.next = String(upTo);
      fold.querySelector(".fold-shown").textContent = String(upTo);
      fold.querySelector(".fold-total").textContent = " of " + total;
      if (upTo >= total || !text.length) fold.hidden = true;
    } finally {
      button.disabled = false;
    }
  }
  document.addEventListener("click", (event) => {
    const button = event.target.closest ? event.target.closest("button.show-more") : null;
    if (button && !button.disabled) showMore(button.closest("p.folded"), button);
  });

  // ---- the agent detail --------------------------------------------------------------------

  const TEXT_TITLES = { prompt: "Prompt", system_prompt: "System prompt (agent type)",
                        schema: "Schema", text: "Answer", structured: "Structured answer" };
  const base = "/api/runs/" + encodeURIComponent(runId);
  let shown = null;

  function fact(dl, name, value) {
    if (value === null || value === undefined || value === "") return;
    const dt = document.createElement("dt");
    dt.textContent = name;
    const dd = document.createElement("dd");
    dd.textContent = value;
    dl.append(dt, dd);
  }

  function textBlock(seq, name, chunk) {
    const box = document.createElement("div");
    box.className = "text";
    box.dataset.name = name;
    const title = document.createElement("h3");
    title.textContent = TEXT_TITLES[name] || name;
    const pre = document.createElement("pre");
    pre.className = "fold";
    pre.textContent = chunk.text;
    box.append(title, pre);
    let next = chunk.next;
    if (next !== null) {
      const more = document.createElement("button");
      more.type = "button";
      more.className = "more";
      const label = () => { more.textContent = "Load more (" + (chunk.total - next) + " more characters)"; };
      label();
      more.addEventListener("click", async () => {
        more.disabled = true;
        const reply = await fetch(base + "/calls/" + seq + "/texts/" + name + "?offset=" + next);
        if (!reply.ok) { more.textContent = "Could not load more"; return; }
        const piece = await reply.json();
        pre.textContent += piece.text;
        next = piece.next;
        if (next === null) more.remove(); else { more.disabled = false; label(); }
      });
      box.append(more);
    }
    return box;
  }

  async function openDetail(seq) {
    const box = $("agent-detail");
    shown = seq;
    for (const row of document.querySelectorAll("tr.agent.selected")) row.classList.remove("selected");
    const agent = agents.get(seq);
    if (agent && agent.row) agent.row.classList.add("selected");
    $("detail-title").textContent = "#" + seq + (agent ? " " + agent.label : "");
    const facts = $("detail-facts");
    const texts = $("detail-texts");
    const failure = $("detail-failure");
    facts.replaceChildren();
    texts.replaceChildren();
    failure.hidden = true;
    box.dataset.loaded = "";
    box.hidden = false;
    const reply = await fetch(base + "/calls/" + seq);
    if (shown !== seq) return;
    if (!reply.ok) {
      const p = document.createElement("p");
      p.className = "muted";
      p.textContent = "No record of what this agent was asked (" + reply.status + ").";
      texts.append(p);
      box.dataset.loaded = String(seq);
      return;
    }
    const call = await reply.json();
    if (shown !== seq) return;
    fact(facts, "Outcome", (call.outcome || (call.started_at ? "running" : "queued")) +
         (call.replayed ? " (replayed from the journal)" : ""));
    fact(facts, "Phase", call.phase);
    fact(facts, "Model", call.model || "the provider's default");
    const o = call.options || {};
    fact(facts, "Agent type", o.agent_type);
    fact(facts, "Effort", o.effort);
    fact(facts, "Isolation", o.isolation);
    fact(facts, "Provider", o.route);
    fact(facts, "Max output tokens", o.max_output_tokens);
    if (call.started_at) fact(facts, "Started", "+" + secs(call.started_at - startAt));
    if (call.started_at && call.ended_at) fact(facts, "Took", secs(call.ended_at - call.started_at));
    if (call.usage) fact(facts, "Tokens", call.usage.input_tokens + " in, " + call.usage.output_tokens + " out");
    if (call.usage && call.usage.cost_usd != null) fact(facts, "Cost", "$" + call.usage.cost_usd.toFixed(4));
    else if (call.usage && call.usage.input_tokens + call.usage.output_tokens > 0) fact(facts, "Cost", "unpriced");
    if (call.failure) {
      failure.querySelector("pre").textContent = reasonText(call.failure);
      failure.hidden = false;
    }
    for (const name of Object.keys(TEXT_TITLES)) {
      if (call.texts[name]) texts.append(textBlock(seq, name, call.texts[name]));
    }
    box.dataset.loaded = String(seq);
  }

  $("tree").addEventListener("click", (event) => {
    const row = event.target.closest("tr.agent");
    if (row) openDetail(Number(row.dataset.seq));
  });
  $("detail-close").addEventListener("click", () => {
    shown = null;
    $("agent-detail").hidden = true;
    for (const row of document.querySelectorAll("tr.agent.selected")) row.classList.remove("selected");
  });

  // ---- cancel -------------------------------------------------------------------------------

  const cancelButton = $("cancel-run");
  if (cancelButton) {
    cancelButton.addEventListener("click", async () => {
      cancelButton.disabled = true;
      cancelButton.textContent = "Cancelling…";
      const reply = await fetch(base + "/cancel", { method: "POST" });
      const body = await reply.json().catch(() => ({}));
      if (reply.status === 202) {
        $("cancel-note").textContent = "cancel requested; waiting for the run to stop";
      } else {
        $("cancel-note").textContent = body.status ? "the run is " + body.status
          : "the cancel was refused (" + reply.status + ")";
        cancelButton.remove();
      }
    });
  }

  // ---- questions ----------------------------------------------------------------------------
  // Posted by fetch(): a form's own navigation carries no Origin under the viewer's
  // no-referrer policy, and the viewer refuses state changes without its Origin.

  for (const form of document.querySelectorAll("form.question")) {
    form.addEventListener("submit", async (submitted) => {
      submitted.preventDefault();
      const fields = new URLSearchParams(new FormData(form));
      const button = submitted.submitter;
      if (button && button.name) fields.append(button.name, button.value);
      for (const b of form.querySelectorAll("button")) b.disabled = true;
      const reply = await fetch(form.action, { method: "POST", body: fields });
      if (reply.ok && reply.redirected) { location.href = reply.url; return; }
      let note = form.querySelector(".q-refused");
      if (!note) {
        note = document.createElement("p");
        note.className = "q-refused error small";
        form.append(note);
      }
      note.textContent = (await reply.text()).trim() || "refused (" + reply.status + ")";
      for (const b of form.querySelectorAll("button")) b.disabled = false;
    });
  }

  hydrate();
  if (chartDirty) planChart();
  const after = Number(root.dataset.lastSeq) || 0;
  // A page of a run that had ended when it was made shows its result already: the end message
  // need not carry it again.
  const query = [];
  if (after) query.push("after=" + after);
  if (root.dataset.status !== "running") query.push("result=0");
  const source = new EventSource(base + "/stream" + (query.length ? "?" + query.join("&") : ""));
  source.addEventListener("events", (message) => {
    for (const event of JSON.parse(message.data)) apply(event);
    schedule();
  });
  source.addEventListener("end", (message) => {
    source.close();
    finish(JSON.parse(message.data));
  });
  source.addEventListener("open", () => { root.dataset.live = root.dataset.live || "open"; });
  setInterval(tick, 1000);
})();
