// The simulator page: while a turn is in flight (a worker answers it), ask the server every
// second whether it ended, and reload the page when it did (the reply is then on the page).
(function () {
  "use strict";
  var waiting = document.getElementById("simulator-waiting");
  if (!waiting) {
    return;
  }
  var url = waiting.dataset.url;
  function poll() {
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        return response.ok ? response.json() : null;
      })
      .then(function (data) {
        if (data && data.done) {
          window.location.reload();
          return;
        }
        window.setTimeout(poll, 1000);
      })
      .catch(function () {
        window.setTimeout(poll, 1000);
      });
  }
  window.setTimeout(poll, 1000);
})();
