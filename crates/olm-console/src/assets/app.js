// The console's one script (no inline script is allowed). A page that shows the cluster's
// state names its event stream (a path under /events/) in data-live on <main>; the server
// sends "changed" when a watch from the versions the page showed sees a change, and the page is
// loaded again (once per burst of changes).
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const main = document.querySelector("main[data-live]");
  if (!main) return;
  const live = main.dataset.live;
  if (!live.startsWith("/events/")) return;
  const events = new EventSource(live);
  let pending;
  events.addEventListener("changed", () => {
    clearTimeout(pending);
    pending = setTimeout(() => location.reload(), 300);
  });
});
