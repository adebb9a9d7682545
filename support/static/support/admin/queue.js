/*
 * The queue page refreshes itself (templates/admin/conversations/session/queue.html) as the
 * conversation page does: it polls the same URL, query string (filter, page) included, for its
 * JSON answer (support/admin/queue.py) every data-refresh-seconds while the tab is visible and
 * every data-hidden-refresh-seconds while hidden, with the ETag of the last answer (a 304 when
 * nothing changed), and swaps the table's body, the counts and the pagination in place; the
 * scroll position is kept and the page is never reloaded. A failed poll, or an answer that is not
 * JSON (the login page after the staff session expired), leaves the page as it is.
 *
 * A customer joins when a row's session id appears that the page had not listed. Staff who opted
 * in (#queue-notify, remembered in localStorage) then get a browser notification and a "(N)" in
 * the title, N the customers who joined since they last looked at the page.
 */
(function () {
  "use strict";

  var NOTIFY_KEY = "support.queue.notify";
  var table;
  var etag = "";
  var known = null;
  var knownMentions = null;
  var unseen = 0;
  var baseTitle = document.title;
  var timer = null;
  var running = null;

  function notifyWanted() {
    try {
      return window.localStorage.getItem(NOTIFY_KEY) === "1";
    } catch (error) {
      return false;
    }
  }

  function setNotifyWanted(wanted) {
    try {
      if (wanted) {
        window.localStorage.setItem(NOTIFY_KEY, "1");
      } else {
        window.localStorage.removeItem(NOTIFY_KEY);
      }
    } catch (error) {
      // Storage refused (private mode): the choice lasts for this page only.
    }
  }

  function showTitle() {
    document.title = unseen ? "(" + unseen + ") " + baseTitle : baseTitle;
  }

  function seen() {
    if (unseen && !document.hidden) {
      unseen = 0;
      showTitle();
    }
  }

  function idsOnPage() {
    var ids = {};
    document.querySelectorAll("#queue-rows tr[data-session-id]").forEach(function (row) {
      ids[row.getAttribute("data-session-id")] = true;
    });
    return ids;
  }

  // For who opted in: each news in the title's badge, and a browser notification.
  function notify(news) {
    if (!news.length || !notifyWanted()) {
      return;
    }
    unseen += news.length;
    showTitle();
    if (!("Notification" in window) || Notification.permission !== "granted") {
      return;
    }
    news.forEach(function (item) {
      try {
        new Notification(item.title, item.options);
      } catch (error) {
        // A browser that only notifies from a service worker: the title badge stays.
      }
    });
  }

  function announce(joined) {
    var box = document.getElementById("queue-notify-box");
    var title = box ? box.getAttribute("data-title") : "";
    notify(joined.map(function (row) {
      return { title: title, options: { body: row.customer, tag: "queue-" + row.id } };
    }));
  }

  function replaceHtml(id, html) {
    var current = document.getElementById(id);
    if (!current || typeof html !== "string") {
      return;
    }
    var holder = document.createElement(current.tagName === "TBODY" ? "table" : "div");
    holder.innerHTML = html.trim();
    var fresh = holder.querySelector("#" + id);
    if (fresh) {
      current.replaceWith(fresh);
    }
  }

  // The reader's unread mentions in colleagues' notes, as links; a new one is announced like a
  // customer joining (badge, and a notification for who opted in).
  function showMentions(mentions) {
    var list = document.getElementById("queue-mentions");
    if (!list || !Array.isArray(mentions)) {
      return;
    }
    list.replaceChildren();
    mentions.forEach(function (mention) {
      var item = document.createElement("li");
      var link = document.createElement("a");
      link.href = mention.url;
      link.textContent = mention.text;
      item.appendChild(link);
      list.appendChild(item);
    });
    list.hidden = mentions.length === 0;
    var fresh = mentions.filter(function (mention) {
      return knownMentions && !knownMentions[String(mention.id)];
    });
    knownMentions = {};
    mentions.forEach(function (mention) {
      knownMentions[String(mention.id)] = true;
    });
    notify(fresh.map(function (mention) {
      return { title: mention.text, options: { tag: "mention-" + mention.id } };
    }));
  }

  function apply(data) {
    var x = window.scrollX;
    var y = window.scrollY;
    replaceHtml("queue-rows", data.rows_html);
    replaceHtml("queue-pages", data.pages_html);
    var count = document.getElementById("queue-count");
    if (count) {
      count.textContent = data.count_text;
    }
    var header = document.querySelector("#waiting-customers strong");
    if (header) {
      header.textContent = String(data.waiting_total);
    }
    var joined = data.waiting.filter(function (row) {
      return known && !known[String(row.id)];
    });
    known = {};
    data.waiting.forEach(function (row) {
      known[String(row.id)] = true;
    });
    announce(joined);
    showMentions(data.mentions);
    window.scrollTo(x, y);
    document.dispatchEvent(new CustomEvent("queue:refreshed", { detail: { joined: joined.length } }));
  }

  function refresh() {
    if (running) {
      return running;
    }
    var headers = { Accept: "application/json" };
    if (etag) {
      headers["If-None-Match"] = etag;
    }
    running = fetch(window.location.href, { credentials: "same-origin", headers: headers, cache: "no-store" })
      .then(function (response) {
        if (response.status === 304) {
          return "unchanged";
        }
        var type = response.headers.get("Content-Type") || "";
        if (!response.ok || response.redirected || type.indexOf("application/json") !== 0) {
          return false;
        }
        etag = response.headers.get("ETag") || "";
        return response.json().then(function (data) {
          apply(data);
          return true;
        });
      })
      .catch(function () {
        return false;
      })
      .then(function (outcome) {
        running = null;
        schedule();
        return outcome;
      });
    return running;
  }

  function schedule() {
    var visible = parseInt(table.getAttribute("data-refresh-seconds"), 10) || 5;
    var hidden = parseInt(table.getAttribute("data-hidden-refresh-seconds"), 10) || 15;
    window.clearTimeout(timer);
    timer = window.setTimeout(refresh, (document.hidden ? hidden : visible) * 1000);
  }

  function startNotifyToggle() {
    var box = document.getElementById("queue-notify-box");
    var toggle = document.getElementById("queue-notify");
    var note = document.getElementById("queue-notify-note");
    if (!box || !toggle) {
      return;
    }
    box.hidden = false;
    toggle.checked = notifyWanted();
    function blocked() {
      var denied = "Notification" in window && Notification.permission === "denied";
      note.textContent = denied && toggle.checked ? box.getAttribute("data-blocked") : "";
      note.hidden = !note.textContent;
    }
    toggle.addEventListener("change", function () {
      setNotifyWanted(toggle.checked);
      if (toggle.checked && "Notification" in window && Notification.permission === "default") {
        Notification.requestPermission().then(blocked);
      }
      blocked();
    });
    blocked();
  }

  function start() {
    table = document.getElementById("queue");
    if (!table) {
      return;
    }
    known = idsOnPage();
    startNotifyToggle();
    document.addEventListener("visibilitychange", function () {
      if (!document.hidden) {
        seen();
        refresh();
      } else {
        schedule();
      }
    });
    window.addEventListener("focus", seen);
    document.addEventListener("click", seen);
    document.addEventListener("keydown", seen);
    // For the browser test and the console: refresh now, without the ETag (true: applied).
    window.queueRefresh = function () {
      return (running || Promise.resolve()).then(function () {
        etag = "";
        return refresh();
      });
    };
    schedule();
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
