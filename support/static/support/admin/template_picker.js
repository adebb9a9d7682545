// The template picker of the conversation page once WhatsApp's window is closed
// (templates/admin/conversations/session/template_picker.html): the chosen template's
// parameter fields, a live preview with the values filled in, and the send. The picker may
// sit inside the admin's own <form>, so the POST goes through a form built here, after the
// page's body: CSRF token, one-time form token, template id and one `parameter` per field.
"use strict";
(function () {
  var picker = document.getElementById("template-picker");
  var dataNode = document.getElementById("template-picker-data");
  if (!picker || !dataNode) { return; }
  var templates = JSON.parse(dataNode.textContent);
  var choice = document.getElementById("template-picker-choice");
  var preview = document.getElementById("template-picker-preview");
  var previewText = document.getElementById("template-picker-preview-text");
  var error = document.getElementById("template-picker-error");
  var send = document.getElementById("template-picker-send");
  var placeholder = /\{\{(\d+)\}\}/g;

  function fieldset() {
    return picker.querySelector('fieldset[data-template="' + choice.value + '"]');
  }

  function inputs() {
    var set = fieldset();
    return set ? Array.prototype.slice.call(set.querySelectorAll("input.template-picker-parameter")) : [];
  }

  function render() {
    var template = templates[choice.value];
    picker.querySelectorAll("fieldset[data-template]").forEach(function (set) {
      set.hidden = set.getAttribute("data-template") !== choice.value;
    });
    error.hidden = true;
    send.disabled = !template;
    preview.hidden = !template;
    if (!template) { previewText.textContent = ""; return; }
    var values = inputs().map(function (input) { return input.value.trim(); });
    // Text nodes only: the values and the template are never read as HTML.
    previewText.textContent = "";
    [template.header, template.body, template.footer].forEach(function (part, index) {
      if (!part) { return; }
      if (previewText.childNodes.length) { previewText.appendChild(document.createElement("br")); }
      var line = document.createElement(index === 0 ? "strong" : index === 2 ? "small" : "span");
      var last = 0;
      part.replace(placeholder, function (match, number, offset) {
        line.appendChild(document.createTextNode(part.slice(last, offset)));
        var value = values[Number(number) - 1];
        var slot = document.createElement("mark");
        slot.className = value ? "filled" : "missing";
        slot.textContent = value || match;
        line.appendChild(slot);
        last = offset + match.length;
        return match;
      });
      line.appendChild(document.createTextNode(part.slice(last)));
      previewText.appendChild(line);
    });
  }

  function hidden(form, name, value) {
    var input = document.createElement("input");
    input.type = "hidden";
    input.name = name;
    input.value = value;
    form.appendChild(input);
  }

  choice.addEventListener("change", render);
  picker.addEventListener("input", function (event) {
    if (event.target.classList && event.target.classList.contains("template-picker-parameter")) { render(); }
  });
  send.addEventListener("click", function () {
    if (!templates[choice.value]) { return; }
    var fields = inputs();
    var empty = fields.filter(function (input) { return !input.value.trim(); });
    if (empty.length) {
      error.hidden = false;
      empty[0].focus();
      return;
    }
    var form = document.createElement("form");
    form.method = "post";
    form.action = picker.getAttribute("data-action");
    form.hidden = true;
    hidden(form, "csrfmiddlewaretoken", picker.getAttribute("data-csrf-token"));
    hidden(form, "form_token", picker.getAttribute("data-form-token"));
    hidden(form, "template", choice.value);
    fields.forEach(function (input) { hidden(form, "parameter", input.value.trim()); });
    document.body.appendChild(form);
    send.disabled = true;
    form.submit();
  });
  render();
})();
