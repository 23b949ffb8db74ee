// The console's one script (no inline script is allowed): pages that show the cluster's
// state ask to be refreshed with data-refresh="SECONDS" on <main>, until watches replace it.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const main = document.querySelector("main[data-refresh]");
  if (!main) return;
  const seconds = Number(main.dataset.refresh) || 5;
  setTimeout(() => location.reload(), seconds * 1000);
});
