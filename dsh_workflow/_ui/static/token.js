// The viewer's address may carry its token (?token=, as printed by `dsh-workflow ui`): the
// server has set its cookie by now, so the token is taken out of the address bar and history.
"use strict";
(function () {
  const url = new URL(window.location.href);
  if (!url.searchParams.has("token")) return;
  url.searchParams.delete("token");
  history.replaceState(history.state, "", url.pathname + url.search + url.hash);
})();
