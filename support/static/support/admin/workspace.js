/*
 * The conversation workspace (templates/admin/conversations/session/workspace.html, composer.html,
 * staff_action_forms.html):
 * - opens scrolled to the newest message;
 * - sends the composer's text with fetch (Accept: application/json) to the reply action or, in
 *   note mode, to the note URL; Ctrl+Enter sends. On success the text is cleared, the page's
 *   one-time token replaced by the answer's and the live poll asked at once (the message arrives
 *   through it); on failure the text stays and the reason is shown in #composer-error;
 * - with a file attached (#attach-file, "Anexar arquivo") the same button sends #staff-send-file
 *   instead, the text as the file's caption; the attachment's name shows in #composer-attachment
 *   until it is sent or removed (the server checks what the file is and answers why not);
 * - asks "Está atribuída a Bruno — responder mesmo assim?" before a reply to a conversation
 *   assigned to a colleague (and when the server answers 409 with that question), then sends
 *   with confirm_other_assignee=1;
 * - "Tentar de novo" on a failed team reply posts #staff-retry (a new send of the same text);
 * - give back and close ask for a confirmation in #confirm-dialog first;
 * - #technical-details open or closed shows or hides the technical details (.show-technical);
 * - the window's time left beside the composer follows the live answer;
 * - the side panel sits below the pinned header (--ws-header-height).
 */
(function () {
  "use strict";

  var composer;
  var textarea;
  var errorBox;
  var fileInput;
  var sending = false;

  function setError(text) {
    if (!errorBox) {
      return;
    }
    errorBox.textContent = text || "";
    errorBox.hidden = !text;
  }

  function mode() {
    var checked = document.querySelector("input[name=composer-mode]:checked");
    return checked ? checked.value : "reply";
  }

  function assignedToOther() {
    return composer && composer.getAttribute("data-assigned-other") === "1";
  }

  function setTokens(token) {
    if (!token) {
      return;
    }
    document.querySelectorAll("#staff-reply input[name=form_token], #staff-send-file input[name=form_token], #staff-retry input[name=form_token]").forEach(function (input) {
      input.value = token;
    });
  }

  // POST `form` (plus `extra` fields) as JSON; resolves {status, data} (data null: not JSON).
  function post(url, form, extra) {
    var body = new FormData(form);
    Object.keys(extra || {}).forEach(function (key) {
      body.set(key, extra[key]);
    });
    return fetch(url, {
      method: "POST",
      body: body,
      credentials: "same-origin",
      headers: { Accept: "application/json" },
    }).then(function (response) {
      var type = response.headers.get("Content-Type") || "";
      if (response.redirected || type.indexOf("application/json") !== 0) {
        return { status: response.status, data: null };
      }
      return response.json().then(function (data) {
        return { status: response.status, data: data };
      });
    });
  }

  // A send that may need the colleague question: asks first when the page knows, and again
  // when the server answers 409; resolves {status, data}.
  function sendConfirming(url, form, extra) {
    extra = extra || {};
    if (assignedToOther() && !extra.confirm_other_assignee) {
      if (!window.confirm(composer.getAttribute("data-confirm-other"))) {
        return Promise.resolve({ status: 0, data: null, cancelled: true });
      }
      extra.confirm_other_assignee = "1";
    }
    return post(url, form, extra).then(function (answer) {
      if (answer.status === 409 && answer.data && answer.data.assigned_to_another) {
        if (!window.confirm(answer.data.error)) {
          return { status: 0, data: null, cancelled: true };
        }
        extra.confirm_other_assignee = "1";
        return post(url, form, extra);
      }
      return answer;
    });
  }

  function refreshLive() {
    if (typeof window.sessionLivePoll === "function") {
      window.sessionLivePoll();
    }
  }

  function failure(answer) {
    if (answer.data && answer.data.error) {
      return answer.data.error;
    }
    return composer.getAttribute("data-failed");
  }

  function attached() {
    return Boolean(fileInput && fileInput.files && fileInput.files.length);
  }

  function sizeText(bytes) {
    if (bytes < 1024 * 1024) {
      return Math.max(1, Math.round(bytes / 1024)) + " KB";
    }
    return (bytes / (1024 * 1024)).toFixed(1).replace(".", ",") + " MB";
  }

  // The attachment's name beside the composer, the button's label and the caption's limit.
  function updateAttachment() {
    var box = document.getElementById("composer-attachment");
    var button = document.getElementById("action-reply");
    var file = attached() ? fileInput.files[0] : null;
    if (box) {
      box.hidden = !file;
      document.getElementById("attachment-name").textContent = file ? file.name + " (" + sizeText(file.size) + ")" : "";
    }
    if (button) {
      button.textContent = composer.getAttribute(file ? "data-send-file" : "data-send-reply");
    }
    if (textarea) {
      if (!textarea.hasAttribute("data-placeholder")) {
        textarea.setAttribute("data-placeholder", textarea.getAttribute("placeholder") || "");
      }
      textarea.setAttribute("placeholder", file ? composer.getAttribute("data-caption-placeholder") : textarea.getAttribute("data-placeholder"));
      textarea.setAttribute("maxlength", file ? "1024" : "4096");
    }
  }

  function removeAttachment() {
    if (fileInput) {
      fileInput.value = "";
    }
    updateAttachment();
  }

  function send(event) {
    event.preventDefault();
    if (sending || !textarea) {
      return;
    }
    var form = document.getElementById("staff-reply");
    var noteUrl = composer.getAttribute("data-note-url");
    var asNote = mode() === "note" && noteUrl;
    var asFile = !asNote && attached();
    if (!asFile && !textarea.value.trim()) {
      textarea.focus();
      return;
    }
    sending = true;
    setError("");
    var button = document.getElementById("action-reply");
    if (button) {
      button.disabled = true;
    }
    var request;
    if (asNote) {
      request = post(noteUrl, form, { text: textarea.value });
    } else if (asFile) {
      var fileForm = document.getElementById("staff-send-file");
      request = sendConfirming(fileForm.action, fileForm, { caption: textarea.value });
    } else {
      request = sendConfirming(form.action, form);
    }
    request
      .then(function (answer) {
        if (answer.cancelled) {
          return;
        }
        if (answer.data && answer.data.ok) {
          textarea.value = "";
          if (asFile) {
            removeAttachment();
          }
          setTokens(answer.data.form_token);
          refreshLive();
          return;
        }
        setError(failure(answer));
      })
      .catch(function () {
        setError(composer.getAttribute("data-failed"));
      })
      .then(function () {
        sending = false;
        updateMode();
        textarea.focus();
      });
  }

  function retry(button) {
    var form = document.getElementById("staff-retry");
    if (!form || button.disabled) {
      return;
    }
    button.disabled = true;
    var id = button.getAttribute("data-message-id");
    sendConfirming(form.action, form, { message: id })
      .then(function (answer) {
        if (answer.cancelled) {
          button.disabled = false;
          return;
        }
        if (answer.data && answer.data.ok) {
          setTokens(answer.data.form_token);
          button.closest(".retry").remove();
          refreshLive();
          return;
        }
        button.disabled = false;
        var box = button.closest(".retry");
        var note = box.querySelector(".retry-error") || document.createElement("span");
        note.className = "retry-error";
        note.textContent = failure(answer);
        box.appendChild(note);
      })
      .catch(function () {
        button.disabled = false;
      });
  }

  function windowOpen() {
    var state = document.getElementById("window-state");
    return !state || state.classList.contains("window-open");
  }

  function updateMode() {
    if (!textarea) {
      return;
    }
    var note = mode() === "note";
    var usable = note || windowOpen();
    textarea.disabled = !usable;
    if (fileInput) {
      // A note carries no file; a closed window takes templates only.
      if (note && attached()) {
        removeAttachment();
      }
      fileInput.disabled = note || !windowOpen();
    }
    var button = document.getElementById("action-reply");
    if (button && !sending) {
      button.disabled = !usable;
    }
    composer.classList.toggle("note-mode", note);
  }

  function remainingText(ms) {
    var minutes = Math.floor(ms / 60000);
    var hours = Math.floor(minutes / 60);
    var rest = minutes % 60;
    return hours + " h " + (rest < 10 ? "0" : "") + rest + " min";
  }

  // The live answer: the window's time left, and whether the assignee is someone else.
  function onLive(event) {
    var data = event.detail && event.detail.data;
    if (!data || !composer) {
      return;
    }
    var left = document.getElementById("window-left");
    var state = document.getElementById("window-state");
    if (data.window && left && state) {
      var closes = data.window.closes_at ? Date.parse(data.window.closes_at) : NaN;
      if (data.window.is_open && !isNaN(closes)) {
        left.textContent = composer.getAttribute("data-left-text").replace("{left}", remainingText(closes - Date.now()));
      } else {
        left.textContent = "";
        if (state.classList.contains("window-open")) {
          state.className = "window-closed";
          state.textContent = composer.getAttribute("data-closed-text");
          updateMode();
        }
      }
    }
    if (typeof data.assigned_to === "string" && data.assigned_to_other !== undefined) {
      composer.setAttribute("data-assigned-other", data.assigned_to_other ? "1" : "0");
    }
  }

  function confirmSubmit(form) {
    form.addEventListener("submit", function (event) {
      if (form.getAttribute("data-confirmed") === "1") {
        return;
      }
      event.preventDefault();
      var text = form.getAttribute("data-confirm");
      var select = document.getElementById("give-back-state");
      if (form.id === "staff-give-back" && select) {
        text = text.replace("{state}", select.options[select.selectedIndex].text);
      }
      var dialog = document.getElementById("confirm-dialog");
      if (!dialog || typeof dialog.showModal !== "function") {
        if (window.confirm(text)) {
          form.setAttribute("data-confirmed", "1");
          form.requestSubmit();
        }
        return;
      }
      document.getElementById("confirm-text").textContent = text;
      dialog.returnValue = "";
      dialog.onclose = function () {
        if (dialog.returnValue === "ok") {
          form.setAttribute("data-confirmed", "1");
          form.requestSubmit();
        }
      };
      dialog.showModal();
      document.getElementById("confirm-cancel").focus();
    });
  }

  // The newest message just above the composer; the page goes no further down, so the side
  // panel shows from its top.
  function scrollToNewest() {
    var list = document.getElementById("transcript");
    var limit = composer ? composer.getBoundingClientRect().top : window.innerHeight;
    var gap = list.getBoundingClientRect().bottom - limit;
    if (gap > 0) {
      window.scrollBy(0, gap);
    }
  }

  function start() {
    var workspace = document.getElementById("workspace");
    if (!workspace) {
      return;
    }
    composer = document.getElementById("composer");
    textarea = document.getElementById("reply-text");
    errorBox = document.getElementById("composer-error");
    fileInput = document.getElementById("attach-file");
    if (fileInput) {
      fileInput.addEventListener("change", function () {
        setError("");
        updateAttachment();
        if (textarea) {
          textarea.focus();
        }
      });
      document.getElementById("attachment-remove").addEventListener("click", removeAttachment);
    }
    var replyForm = document.getElementById("staff-reply");
    if (composer && textarea && replyForm) {
      replyForm.addEventListener("submit", send);
      textarea.addEventListener("keydown", function (event) {
        if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
          event.preventDefault();
          replyForm.requestSubmit();
        }
      });
      document.querySelectorAll("input[name=composer-mode]").forEach(function (radio) {
        radio.addEventListener("change", updateMode);
      });
      updateMode();
    }
    ["staff-give-back", "staff-close"].forEach(function (id) {
      var form = document.getElementById(id);
      if (form) {
        confirmSubmit(form);
      }
    });
    document.getElementById("transcript").addEventListener("click", function (event) {
      var button = event.target.closest(".retry-button");
      if (button) {
        retry(button);
      }
    });
    var details = document.getElementById("technical-details");
    if (details) {
      details.addEventListener("toggle", function () {
        workspace.classList.toggle("show-technical", details.open);
      });
    }
    document.addEventListener("session:live", onLive);
    var header = document.getElementById("staff-actions");
    function measureHeader() {
      workspace.style.setProperty("--ws-header-height", header.offsetHeight + "px");
    }
    if (header) {
      measureHeader();
      window.addEventListener("resize", measureHeader);
    }
    if (!window.location.hash) {
      scrollToNewest();
    }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
