// A run page: applies the run's stored events (sent by the server as server-sent events) to a
// tree of phases and agents, a timeline chart and the log, without reloading. DOM work is
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

  const agents = new Map();        // seq -> agent
  const phases = new Map();        // title -> {title, el, body, counts, agents: []}
  const running = new Set();       // seqs of agents still going
  const dirty = new Set();         // seqs whose row needs drawing
  const dirtyPhases = new Set();
  const pendingLog = [];
  let startAt = Number(root.dataset.created);
  let endAt = null;
  let tokens = 0, replayed = 0;
  let cost = null, unpriced = 0;  // the known costs' sum (null: none known yet), children without one
  let framePending = false, chartDirty = false, lastChart = 0, chartTimer = null;
  let ended = false;

  const $ = (id) => document.getElementById(id);
  const secs = (s) => (s < 1 ? (Math.max(s, 0) * 1000).toFixed(0) + " ms"
                      : s < 60 ? s.toFixed(1) + " s"
                      : Math.floor(s / 60) + " min " + String(Math.floor(s % 60)).padStart(2, "0") + " s");
  const now = () => Date.now() / 1000;

  function phaseOf(title) {
    const key = title || NO_PHASE;
    let phase = phases.get(key);
    if (!phase) {
      const el = document.createElement("details");
      el.className = "phase";
      el.open = true;
      el.dataset.phase = key;
      el.innerHTML = '<summary><span class="title"></span><span class="counts"></span></summary>' +
        '<table><thead><tr><th>#</th><th>Label</th><th>Status</th><th>Model</th>' +
        '<th class="num">Tokens</th><th class="num">Elapsed</th></tr></thead><tbody></tbody></table>';
      el.querySelector(".title").textContent = key;
      phase = { title: key, el, body: el.querySelector("tbody"),
                counts: el.querySelector(".counts"), agents: [] };
      phases.set(key, phase);
      const empty = $("tree-empty");
      if (empty) empty.remove();
      $("tree").appendChild(el);
    }
    return phase;
  }

  function apply(event) {
    const d = event.data;
    switch (d.event) {
      case "WorkflowStarted": startAt = event.at; break;
      case "PhaseStarted": phaseOf(d.title); break;
      case "LogEmitted": pendingLog.push(event); break;
      case "AgentStarted": {
        const a = { seq: d.seq, label: d.label, phase: d.phase || NO_PHASE, status: "running",
                    start: event.at, end: null, tokens: null, model: d.model || null,
                    replayed: false, row: null };
        agents.set(d.seq, a); running.add(d.seq); touch(a); break;
      }
      case "AgentEnded": {
        const a = agents.get(d.seq);
        if (!a) break;
        a.status = d.outcome; a.end = event.at;
        a.tokens = d.usage ? d.usage.input_tokens + d.usage.output_tokens : null;
        tokens += a.tokens || 0;
        if (d.usage && typeof d.usage.cost_usd === "number") cost = (cost || 0) + d.usage.cost_usd;
        else if (a.tokens) unpriced += 1;
        running.delete(d.seq); touch(a); break;
      }
      case "AgentReplayed": {
        const a = { seq: d.seq, label: d.label, phase: d.phase || NO_PHASE, status: "replayed",
                    start: event.at, end: event.at, tokens: null, model: d.model || null,
                    replayed: true, row: null };
        agents.set(d.seq, a); replayed += 1; touch(a); break;
      }
      case "WorkflowEnded": endAt = event.at; break;
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
    return [String(a.seq), a.label, a.status, a.model || "—",
            a.tokens == null ? "—" : String(a.tokens), a.replayed ? "—" : secs(elapsed)];
  }

  function drawRow(a) {
    const phase = phaseOf(a.phase);
    if (!a.row) {
      a.row = document.createElement("tr");
      a.row.className = "agent";
      a.row.dataset.seq = a.seq;
      for (let i = 0; i < 6; i++) a.row.appendChild(document.createElement("td"));
      a.row.cells[1].className = "label";
      a.row.cells[4].className = a.row.cells[5].className = "num";
      phase.agents.push(a);
      phase.body.appendChild(a.row);
    }
    const cells = cellsFor(a);
    for (let i = 0; i < 6; i++) {
      if (i !== 2 && a.row.cells[i].textContent !== cells[i]) a.row.cells[i].textContent = cells[i];
    }
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
    $("token-count").textContent = String(tokens);
    $("cost-count").textContent = cost === null ? "—"
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
    return a.status + where + " · +" + secs(a.start - startAt) + " for " + secs(end - a.start);
  }

  function tick() {
    if (ended) return;
    for (const seq of running) dirty.add(seq);
    if (running.size) chartDirty = true;
    schedule();
  }

  function finish(payload) {
    ended = true;
    root.dataset.status = payload.status;
    const badge = $("run-status");
    badge.textContent = payload.status;
    badge.className = "badge s-" + payload.status;
    $("run-duration").textContent = payload.row.duration;
    if (payload.error) {
      $("error-code").textContent = payload.error.code || "uncaught script error";
      $("error-message").textContent = payload.error.message;
      $("error-box").hidden = false;
    }
    if (payload.result_html) $("result").innerHTML = payload.result_html;
    if (payload.result_full_html) $("result-full").innerHTML = payload.result_full_html;
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

  const source = new EventSource("/api/runs/" + encodeURIComponent(runId) + "/stream");
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
