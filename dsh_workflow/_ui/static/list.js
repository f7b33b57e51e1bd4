// The run list: filters apply on change; the rows refresh every 2 s (new runs, statuses).
"use strict";
(function () {
  const form = document.getElementById("filters");
  const rows = document.getElementById("run-rows");
  document.getElementById("status-filter").addEventListener("change", () => form.submit());
  let typing = null;
  document.getElementById("name-filter").addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(refresh, 250);
  });
  async function refresh() {
    const query = new URLSearchParams(new FormData(form)).toString();
    history.replaceState(null, "", query ? "/?" + query : "/");
    const response = await fetch("/runs-table?" + query);
    if (response.ok) rows.innerHTML = await response.text();
  }
  setInterval(() => { if (!document.hidden) refresh(); }, 2000);
})();
