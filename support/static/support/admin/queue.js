/*
 * The queue page refreshes itself (templates/admin/conversations/session/queue.html): every
 * data-refresh-seconds it fetches the same URL, query string (filter, page) included, and swaps
 * the table's body, the counts and the pagination in place; the scroll position is kept and the
 * page is never reloaded. Nothing runs while the tab is hidden; a failed fetch or an answer that
 * is not the queue (a login page after the staff session expired) leaves the page as it is.
 */
(function () {
  "use strict";

  var SWAPPED = ["queue-rows", "queue-count", "queue-pages", "waiting-customers"];

  function swap(fresh) {
    if (!fresh.getElementById("queue-rows")) {
      return false;
    }
    var x = window.scrollX;
    var y = window.scrollY;
    SWAPPED.forEach(function (id) {
      var current = document.getElementById(id);
      var replacement = fresh.getElementById(id);
      if (current && replacement) {
        current.replaceWith(document.importNode(replacement, true));
      }
    });
    window.scrollTo(x, y);
    document.dispatchEvent(new CustomEvent("queue:refreshed"));
    return true;
  }

  function refresh() {
    if (document.hidden) {
      return Promise.resolve(false);
    }
    return fetch(window.location.href, {
      credentials: "same-origin",
      headers: { "X-Requested-With": "XMLHttpRequest" },
      cache: "no-store",
    })
      .then(function (response) {
        if (!response.ok || response.redirected) {
          return null;
        }
        return response.text();
      })
      .then(function (html) {
        if (!html) {
          return false;
        }
        return swap(new DOMParser().parseFromString(html, "text/html"));
      })
      .catch(function () {
        return false;
      });
  }

  function start() {
    var table = document.getElementById("queue");
    if (!table) {
      return;
    }
    var seconds = parseInt(table.getAttribute("data-refresh-seconds"), 10) || 30;
    window.setInterval(refresh, seconds * 1000);
    document.addEventListener("visibilitychange", function () {
      if (!document.hidden) {
        refresh();
      }
    });
    // For the browser test and the console: refresh now.
    window.queueRefresh = refresh;
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
