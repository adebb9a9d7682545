// Quick replies in the reply box (#reply-text) of the conversation page: "/" followed by letters
// lists the matching replies (GET <data-quick-replies-url>?q=<letters>, support.admin.
// quick_replies); ArrowUp/ArrowDown move through them, Enter, Tab or a click inserts the chosen
// one's text in place of "/<letters>", Escape closes the list. The text arrives with the
// customer's and the staff member's first names filled in; a placeholder left in it (an unknown
// customer name) is selected, to be typed over. Nothing is sent: the text is edited and sent
// as any reply. Loaded by change_form.html (its script tag carries the URL) for staff who attend
// conversations; its stylesheet, quick_replies.css (the tag's data-stylesheet), is linked from
// here: the CSP allows no inline style.
"use strict";
(function () {
  var script = document.currentScript;
  var url = script && script.dataset.quickRepliesUrl;
  if (!url) { return; }
  // The staff's texts, translated by the page (the tag's data-list-label, data-empty-text, …).
  var texts = script.dataset;
  // "/" at the start or after a space, then up to 40 letters, digits or hyphens, up to the caret.
  var TRIGGER = /(^|\s)\/([\p{L}\p{N}-]{0,40})$/u;
  var PLACEHOLDER = /\{\{[^{}]*\}\}/;
  var DELAY_MS = 120;

  function start(textarea) {
    var list = document.createElement("ul");
    list.id = "quick-replies-list";
    list.className = "quick-replies";
    list.setAttribute("role", "listbox");
    list.setAttribute("aria-label", texts.listLabel || "");
    list.hidden = true;
    // Above the box: the composer sits at the bottom of the window, the list grows upwards.
    textarea.insertAdjacentElement("beforebegin", list);
    textarea.setAttribute("aria-controls", list.id);
    textarea.setAttribute("aria-autocomplete", "list");
    textarea.setAttribute("aria-expanded", "false");

    var results = [];
    var active = -1;
    var token = null; // {start, end, query} of the "/letters" being completed
    var timer = null;
    var sequence = 0;

    function close() {
      results = [];
      active = -1;
      token = null;
      list.hidden = true;
      list.replaceChildren();
      textarea.setAttribute("aria-expanded", "false");
      textarea.removeAttribute("aria-activedescendant");
    }

    function highlight(index) {
      active = index;
      Array.prototype.forEach.call(list.children, function (item, i) {
        var on = i === index;
        item.classList.toggle("active", on);
        item.setAttribute("aria-selected", on ? "true" : "false");
        if (on) {
          textarea.setAttribute("aria-activedescendant", item.id);
          item.scrollIntoView({ block: "nearest" });
        }
      });
    }

    function render(query) {
      list.replaceChildren();
      if (!results.length) {
        var empty = document.createElement("li");
        empty.className = "quick-replies-empty";
        empty.textContent = (texts.emptyText || "").replace("{query}", query);
        list.appendChild(empty);
      }
      results.forEach(function (reply, index) {
        var item = document.createElement("li");
        item.id = "quick-reply-" + index;
        item.className = "quick-reply";
        item.setAttribute("role", "option");
        item.dataset.shortcut = reply.shortcut;
        var head = document.createElement("span");
        head.className = "quick-reply-head";
        var shortcut = document.createElement("strong");
        shortcut.textContent = "/" + reply.shortcut;
        var title = document.createElement("span");
        title.className = "quick-reply-title";
        title.textContent = reply.title + " · " + (reply.shared ? texts.sharedText : texts.personalText);
        head.append(shortcut, " ", title);
        var text = document.createElement("span");
        text.className = "quick-reply-text";
        text.textContent = reply.text;
        item.append(head, text);
        // mousedown, not click: the textarea keeps the focus and the caret.
        item.addEventListener("mousedown", function (event) {
          event.preventDefault();
          choose(index);
        });
        list.appendChild(item);
      });
      list.hidden = false;
      textarea.setAttribute("aria-expanded", "true");
      highlight(results.length ? 0 : -1);
    }

    function currentToken() {
      var caret = textarea.selectionStart;
      if (caret !== textarea.selectionEnd) { return null; }
      var match = TRIGGER.exec(textarea.value.slice(0, caret));
      if (!match) { return null; }
      return { start: caret - match[2].length - 1, end: caret, query: match[2] };
    }

    function choose(index) {
      var reply = results[index];
      // The "/letters" as they are now: typed on since the list was shown, they are all replaced.
      token = currentToken();
      if (!reply || !token) { close(); return; }
      var value = textarea.value;
      textarea.value = value.slice(0, token.start) + reply.text + value.slice(token.end);
      var inserted = textarea.value.slice(token.start, token.start + reply.text.length);
      var left = PLACEHOLDER.exec(inserted);
      if (left) {
        textarea.setSelectionRange(token.start + left.index, token.start + left.index + left[0].length);
      } else {
        var caret = token.start + reply.text.length;
        textarea.setSelectionRange(caret, caret);
      }
      close();
      textarea.focus();
      // Other scripts of the page (the draft kept across updates, counters) see the new text.
      textarea.dispatchEvent(new Event("input", { bubbles: true }));
    }

    function lookUp() {
      var found = currentToken();
      if (!found) { close(); return; }
      var query = found.query;
      var mine = ++sequence;
      fetch(url + "?q=" + encodeURIComponent(query), {
        headers: { Accept: "application/json" },
        credentials: "same-origin",
      })
        .then(function (response) { return response.ok ? response.json() : null; })
        .then(function (body) {
          if (mine !== sequence) { return; } // a newer keystroke asked again
          if (!body) { close(); return; }
          results = body.results || [];
          token = found;
          render(query);
        })
        .catch(function () { if (mine === sequence) { close(); } });
    }

    textarea.addEventListener("input", function (event) {
      if (event.isTrusted === false && token === null && list.hidden) {
        // Our own "input" after an insertion: nothing to look up.
        return;
      }
      clearTimeout(timer);
      sequence++; // an answer still on its way is for letters no longer there
      timer = setTimeout(lookUp, DELAY_MS);
    });

    textarea.addEventListener("keydown", function (event) {
      if (list.hidden) { return; }
      var plain = !event.ctrlKey && !event.metaKey && !event.altKey;
      if (event.key === "Escape") {
        event.preventDefault();
        sequence++;
        close();
      } else if (event.key === "ArrowDown" && results.length) {
        event.preventDefault();
        highlight((active + 1) % results.length);
      } else if (event.key === "ArrowUp" && results.length) {
        event.preventDefault();
        highlight((active - 1 + results.length) % results.length);
      } else if ((event.key === "Enter" || event.key === "Tab") && plain && !event.shiftKey
                 && active >= 0) {
        event.preventDefault();
        event.stopImmediatePropagation();
        choose(active);
      }
    }, true);

    textarea.addEventListener("blur", function () {
      // After a click on an item (which keeps the focus) nothing closes; leaving the box does.
      setTimeout(function () {
        if (document.activeElement !== textarea) { sequence++; close(); }
      }, 150);
    });
  }

  function attach() {
    var textarea = document.getElementById("reply-text");
    if (!textarea || textarea.dataset.quickReplies === "on") { return; }
    textarea.dataset.quickReplies = "on";
    if (script.dataset.stylesheet) {
      var css = document.createElement("link");
      css.rel = "stylesheet";
      css.href = script.dataset.stylesheet;
      document.head.appendChild(css);
    }
    start(textarea);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", attach);
  } else {
    attach();
  }
})();
