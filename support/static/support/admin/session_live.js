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
 * A media block comes rendered by the server (media.html, `media_html`); the blocks still
 * changing (`data-media-pending`: a download or a transcription under way) are asked for again
 * with each poll (`media=<message ids>`) and replaced when their state changed. A reaction on
 * an outbound bubble already shown comes with its delivery (`statuses`).
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

  // The bot bubble's "Guardar como caso de teste" link, as transcript_list.html writes it.
  function saveCaseSpan(url) {
    var span = document.createElement("span");
    span.className = "tech";
    span.appendChild(document.createTextNode(" · "));
    var link = document.createElement("a");
    link.className = "save-case";
    link.href = url;
    link.textContent = list.getAttribute("data-save-case-label") || "";
    span.appendChild(link);
    return span;
  }

  function reactionSpan(emoji) {
    var span = document.createElement("span");
    span.className = "reaction";
    span.title = list.getAttribute("data-reaction-label") || "";
    span.textContent = emoji;
    return span;
  }

  function chip(text) {
    var element = document.createElement("li");
    element.className = "chip";
    element.textContent = text;
    return element;
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
    if (message.quote) {
      var quote = document.createElement("blockquote");
      quote.className = "quote";
      var label = document.createElement("span");
      label.className = "quote-label";
      label.textContent = list.getAttribute("data-quote-label") || "";
      quote.appendChild(label);
      quote.appendChild(document.createTextNode(" " + message.quote));
      li.appendChild(quote);
    }
    if (message.reply_kind) {
      var kind = div("reply-kind");
      var mark = document.createElement("span");
      mark.className = "chip";
      mark.textContent = message.reply_kind;
      kind.appendChild(mark);
      li.appendChild(kind);
    }
    if (message.media_html) {
      // Rendered by the server from the page's own partial (media.html), its texts escaped.
      li.insertAdjacentHTML("beforeend", message.media_html);
    } else {
      var text = div("text");
      // Escaped by the server (whatsapp_html): only its <strong> and <em> are markup.
      text.innerHTML = message.html;
      li.appendChild(text);
    }
    if (message.options && message.options.length) {
      var options = document.createElement("ul");
      options.className = "options";
      message.options.forEach(function (title) {
        options.appendChild(chip(title));
      });
      li.appendChild(options);
    }
    var meta = div("meta", message.meta);
    if (message.technical) {
      meta.appendChild(techSpan(message.technical));
    }
    if (message.delivery) {
      meta.appendChild(document.createTextNode(" · "));
      meta.appendChild(deliverySpan(message.delivery, message.delivery_failed));
    }
    if (message.save_case_url) {
      meta.appendChild(saveCaseSpan(message.save_case_url));
    }
    li.appendChild(meta);
    if (message.reaction) {
      li.appendChild(reactionSpan(message.reaction));
    }
    if (message.retryable) {
      var box = retryBox(message.id);
      if (box) {
        li.appendChild(box);
      }
    }
    return li;
  }

  function updateReaction(bubble, emoji) {
    var current = bubble.querySelector(".reaction");
    if (!emoji) {
      if (current) {
        current.remove();
      }
      return;
    }
    if (current) {
      current.textContent = emoji;
      return;
    }
    var span = reactionSpan(emoji);
    var retry = bubble.querySelector(".retry");
    bubble.insertBefore(span, retry);
  }

  // A media block shown, as it is now: replaced when it changed.
  function updateMedia(block) {
    var current = list.querySelector('[data-message-id="' + block.id + '"] .media');
    if (!current || current.getAttribute("data-media-state") === block.state) {
      return;
    }
    var holder = document.createElement("div");
    holder.innerHTML = block.html;
    if (holder.firstElementChild) {
      current.replaceWith(holder.firstElementChild);
    }
  }

  function pendingMedia() {
    var ids = [];
    list.querySelectorAll(".media[data-media-pending]").forEach(function (block) {
      var bubble = block.closest("[data-message-id]");
      if (bubble && ids.length < 30) {
        ids.push(bubble.getAttribute("data-message-id"));
      }
    });
    return ids;
  }

  function updateDelivery(status) {
    var bubble = list.querySelector('[data-message-id="' + status.id + '"]');
    if (!bubble) {
      return;
    }
    updateReaction(bubble, status.reaction || "");
    if (!status.delivery) {
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
    (data.media || []).forEach(updateMedia);
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
    var media = pendingMedia();
    var query = "?after=" + after + "&after_note=" + afterNote;
    if (media.length) {
      query += "&media=" + media.join(",");
    }
    running = fetch(url + query, {
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
