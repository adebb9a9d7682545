// The replay run page: while the run is not finished, read its progress every 2 s and show it;
// reload the page when it ends (the results and totals are then complete).
(function () {
  "use strict";
  var box = document.getElementById("replay-progress");
  if (!box || box.dataset.finished === "1") {
    return;
  }
  var url = box.dataset.url;
  var shown = -1;
  function text(id, value) {
    var node = document.getElementById(id);
    if (node) {
      node.textContent = value;
    }
  }
  function poll() {
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        return response.ok ? response.json() : null;
      })
      .then(function (data) {
        if (!data) {
          return;
        }
        if (data.finished) {
          window.location.reload();
          return;
        }
        text("replay-status", data.status_label);
        text("replay-done", data.done);
        text("replay-selected", data.selected);
        text("replay-detail", data.detail);
        var bar = document.getElementById("replay-bar");
        if (bar) {
          bar.max = Math.max(data.selected, 1);
          bar.value = data.done;
        }
        if (data.done !== shown && shown !== -1) {
          // New results arrived: reload to show their rows (cheap: one query for the table).
          window.location.reload();
          return;
        }
        shown = data.done;
      })
      .catch(function () {})
      .then(function () {
        window.setTimeout(poll, 2000);
      });
  }
  window.setTimeout(poll, 2000);
})();
