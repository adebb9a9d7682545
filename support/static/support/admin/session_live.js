/*
 * The conversation page updates itself (templates/admin/conversations/session/change_form.html):
 * it polls the live endpoint (#transcript's data-live-url, support/admin/live.py) every 2 s while
 * the tab is visible and every 10 s while hidden, with the ETag of the last answer (a 304 when
 * nothing changed). New messages are appended to #transcript as the page renders them, the
 * delivery of the bubbles shown is updated, and #live-state and #session-presence say the state,
 * the assignment and who else has the page open. Nothing else on the page is touched: the
 * composer keeps its text and the window its scroll position (a reader at the end of the
 * conversation stays there: the new messages are scrolled into view above the composer). A failed poll, or an answer that is not JSON (the login page
 * after the staff session expired), leaves the page as it is. Internal notes (`notes`, after the
 * newest note shown: `after_note`) are appended as note bubbles; a failed team text reply gets the
 * "Tentar de novo" button (workspace.js handles it) when #transcript names its label. Every answer
 * is announced as a `session:live` event with the data, for the workspace's other parts.
 */
(function () {
  "use strict";

  var VISIBLE_MS = 2000;
  var HIDDEN_MS = 10000;
  var list;
  var url;
  var after = 0;
  var afterNote = 0;
  var etag = "";
  var timer = null;
  var running = null;

  function shownMaxId(attribute) {
    var max = 0;
    list.querySelectorAll("li[" + attribute + "]").forEach(function (item) {
      var id = parseInt(item.getAttribute(attribute), 10);
      if (id > max) {
        max = id;
      }
    });
    return max;
  }

  function div(className, text) {
    var element = document.createElement("div");
    element.className = className;
    if (text) {
      element.textContent = text;
    }
    return element;
  }

  function deliverySpan(delivery, failed) {
    var span = document.createElement("span");
    span.className = failed ? "delivery delivery-failed" : "delivery";
    span.textContent = delivery;
    return span;
  }

  function retryBox(id) {
    var label = list.getAttribute("data-retry-label");
    if (!label || !document.getElementById("staff-retry")) {
      return null;
    }
    var box = div("retry");
    var button = document.createElement("button");
    button.type = "button";
    button.className = "button retry-button";
    button.setAttribute("data-message-id", String(id));
    button.textContent = label;
    box.appendChild(button);
    return box;
  }

  function techSpan(text) {
    var span = document.createElement("span");
    span.className = "tech";
    span.textContent = " · " + text;
    return span;
  }

  // An internal note: {id, author, text, html, created_at}.
  function noteItem(note) {
    var li = document.createElement("li");
    li.className = "bubble note";
    li.setAttribute("data-note-id", String(note.id));
    li.appendChild(div("who", note.author));
    var text = div("text");
    // Escaped by the server, as a message's html.
    text.innerHTML = note.html;
    li.appendChild(text);
    var when = new Date(note.created_at);
    li.appendChild(div("meta", isNaN(when) ? "" : when.toLocaleString("pt-BR", { day: "2-digit", month: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit" }).replace(",", "")));
    return li;
  }

  // The same markup as transcript_list.html's bubbles.
  function item(message) {
    var li = document.createElement("li");
    li.setAttribute("data-message-id", String(message.id));
    if (message.side === "system") {
      li.className = "event";
      li.textContent = message.meta + (message.text ? ": " : "");
      if (message.text) {
        // Escaped by the server; its model code is a <span class="tech">.
        var sentence = document.createElement("span");
        sentence.innerHTML = message.html;
        li.appendChild(sentence);
      }
      return li;
    }
    li.className = "bubble " + message.side + (message.superseded ? " superseded" : "");
    li.setAttribute("data-kind", message.kind);
    li.appendChild(div("who", message.author));
    if (message.superseded) {
      li.appendChild(div("mark", list.getAttribute("data-superseded-mark")));
    }
    var text = div("text");
    // Escaped by the server (whatsapp_html): only its <strong> and <em> are markup.
    text.innerHTML = message.html;
    li.appendChild(text);
    if ((message.kind === "image" || message.kind === "document") && list.getAttribute("data-media-url")) {
      var mediaBox = div("media-link");
      var link = document.createElement("a");
      link.href = list.getAttribute("data-media-url").replace("/0/", "/" + message.id + "/");
      link.target = "_blank";
      link.rel = "noopener";
      link.textContent = list.getAttribute("data-media-label");
      mediaBox.appendChild(link);
      li.appendChild(mediaBox);
    }
    var meta = div("meta", message.meta);
    if (message.technical) {
      meta.appendChild(techSpan(message.technical));
    }
    if (message.delivery) {
      meta.appendChild(document.createTextNode(" · "));
      meta.appendChild(deliverySpan(message.delivery, message.delivery_failed));
    }
    li.appendChild(meta);
    if (message.retryable) {
      var box = retryBox(message.id);
      if (box) {
        li.appendChild(box);
      }
    }
    return li;
  }

  function updateDelivery(status) {
    var bubble = list.querySelector('[data-message-id="' + status.id + '"]');
    if (!bubble || !status.delivery) {
      return;
    }
    if (
      status.delivery_failed &&
      bubble.classList.contains("staff") &&
      bubble.getAttribute("data-kind") === "text" &&
      !bubble.querySelector(".retry")
    ) {
      var box = retryBox(status.id);
      if (box) {
        bubble.appendChild(box);
      }
    }
    var current = bubble.querySelector(".delivery");
    if (current) {
      if (current.textContent !== status.delivery) {
        current.replaceWith(deliverySpan(status.delivery, status.delivery_failed));
      }
      return;
    }
    var meta = bubble.querySelector(".meta");
    if (meta) {
      meta.appendChild(document.createTextNode(" · "));
      meta.appendChild(deliverySpan(status.delivery, status.delivery_failed));
    }
  }

  // How far the end of the conversation is below where a reader at the bottom sees it: the
  // top of the workspace's pinned composer, else the bottom of the window.
  function endGap() {
    var composer = document.getElementById("composer");
    var limit = composer ? composer.getBoundingClientRect().top : window.innerHeight;
    return list.getBoundingClientRect().bottom - limit;
  }

  function atBottom() {
    return endGap() < 40;
  }

  function apply(data) {
    var x = window.scrollX;
    var y = window.scrollY;
    var stick = atBottom();
    var added = 0;
    data.messages.forEach(function (message) {
      if (message.id > after) {
        after = message.id;
      }
      if (list.querySelector('[data-message-id="' + message.id + '"]')) {
        return;
      }
      var empty = list.querySelector("li.event:not([data-message-id])");
      if (empty) {
        empty.remove();
      }
      list.appendChild(item(message));
      added += 1;
    });
    (data.notes || []).forEach(function (note) {
      if (note.id > afterNote) {
        afterNote = note.id;
      }
      if (list.querySelector('[data-note-id="' + note.id + '"]')) {
        return;
      }
      list.appendChild(noteItem(note));
      added += 1;
    });
    data.statuses.forEach(updateDelivery);
    var state = document.getElementById("live-state");
    if (state) {
      state.textContent = data.status_text;
    }
    var presence = document.getElementById("session-presence");
    if (presence) {
      presence.textContent = data.presence;
      presence.hidden = !data.presence;
    }
    window.scrollTo(x, y);
    if (added && stick && endGap() > 0) {
      window.scrollBy(0, endGap());
    }
    document.dispatchEvent(new CustomEvent("session:live", { detail: { added: added, data: data } }));
    return data.more;
  }

  function poll() {
    if (running) {
      return running;
    }
    var headers = { Accept: "application/json" };
    if (etag) {
      headers["If-None-Match"] = etag;
    }
    running = fetch(url + "?after=" + after + "&after_note=" + afterNote, {
      credentials: "same-origin",
      headers: headers,
      cache: "no-store",
    })
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
          return apply(data) ? "more" : true;
        });
      })
      .catch(function () {
        return false;
      })
      .then(function (outcome) {
        running = null;
        schedule(outcome === "more" ? 0 : null);
        return outcome === "more" ? true : outcome;
      });
    return running;
  }

  function schedule(delay) {
    window.clearTimeout(timer);
    timer = window.setTimeout(poll, delay === null ? (document.hidden ? HIDDEN_MS : VISIBLE_MS) : delay);
  }

  function start() {
    list = document.getElementById("transcript");
    url = list && list.getAttribute("data-live-url");
    if (!url) {
      return;
    }
    after = shownMaxId("data-message-id");
    afterNote = shownMaxId("data-note-id");
    document.addEventListener("visibilitychange", function () {
      if (!document.hidden) {
        poll();
      } else {
        schedule(null);
      }
    });
    // For the browser test and the console: poll now (true: applied, "unchanged": a 304).
    window.sessionLivePoll = poll;
    poll();
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
