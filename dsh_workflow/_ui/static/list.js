// The run list: filters apply on change; the rows refresh every 2 s (new runs, statuses).
// One refresh at a time: the next waits until the last has answered (a slow server is never
// asked again before it answers), and typing while one is under way asks for one more after it.
"use strict";
(function () {
  const form = document.getElementById("filters");
  const rows = document.getElementById("run-rows");
  const PERIOD_MS = 2000;
  document.getElementById("status-filter").addEventListener("change", () => form.submit());
  let typing = null, busy = false, again = false, timer = null;
  document.getElementById("name-filter").addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(refresh, 250);
  });
  async function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    clearTimeout(timer);
    try {
      const query = new URLSearchParams(new FormData(form)).toString();
      history.replaceState(null, "", query ? "/?" + query : "/");
      const response = await fetch("/runs-table?" + query);
      if (response.ok) rows.innerHTML = await response.text();
    } catch (error) {
      // the viewer stopped or the network dropped: try again at the next tick
    } finally {
      busy = false;
      if (again) { again = false; refresh(); } else { timer = setTimeout(tick, PERIOD_MS); }
    }
  }
  function tick() {
    if (document.hidden) { timer = setTimeout(tick, PERIOD_MS); return; }
    refresh();
  }
  timer = setTimeout(tick, PERIOD_MS);
})();
