// The labels box of the conversation page (labels.html, its forms in labels_form.html): adding
// or removing a label posts the same form with "Accept: application/json" (support.admin.labels)
// and redraws the chips and the select from the answer, without reloading the page, so the
// text being written in the reply box stays. The answer's sentence is shown in the box; the event
// reaches the transcript with the page's live updates. An answer that is not JSON (an expired
// login) reloads the page, which shows why.
"use strict";
(function () {
  var box = document.getElementById("session-labels");
  var addForm = document.getElementById("session-labels-add");
  var removeForm = document.getElementById("session-labels-remove");
  if (!box || !addForm || !removeForm || !window.fetch) { return; }
  var chips = document.getElementById("session-label-chips");
  var select = document.getElementById("session-label-add");
  var status = document.getElementById("session-labels-status");
  var addRow = document.getElementById("session-label-add-row");

  // Every label the page knows (the chips and the select's options), by id.
  var known = {};
  chips.querySelectorAll("li[data-label-id]").forEach(function (chip) {
    known[chip.dataset.labelId] = { name: chip.dataset.labelName, colour: chip.dataset.labelColour };
  });
  if (select) {
    Array.prototype.forEach.call(select.options, function (option) {
      if (option.value) {
        known[option.value] = { name: option.textContent, colour: option.dataset.labelColour };
      }
    });
  }

  function chip(id, label) {
    var item = document.createElement("li");
    item.className = "label-chip label-" + label.colour;
    item.dataset.labelId = id;
    item.dataset.labelName = label.name;
    item.dataset.labelColour = label.colour;
    item.append(label.name);
    var remove = document.createElement("button");
    remove.type = "submit";
    remove.setAttribute("form", removeForm.id);
    remove.name = "remove";
    remove.value = id;
    remove.className = "label-remove";
    var text = (box.dataset.removeText || "").replace("{name}", label.name);
    remove.title = text;
    remove.setAttribute("aria-label", text);
    remove.textContent = "×";
    item.appendChild(remove);
    return item;
  }

  function redraw(current) {
    var on = {};
    chips.replaceChildren();
    current.forEach(function (label) {
      var id = String(label.id);
      on[id] = true;
      known[id] = { name: label.name, colour: label.colour };
      chips.appendChild(chip(id, known[id]));
    });
    if (!current.length) {
      var none = document.createElement("li");
      none.className = "label-none";
      none.textContent = box.dataset.emptyText || "";
      chips.appendChild(none);
    }
    if (select) {
      var blank = select.options[0];
      select.replaceChildren(blank);
      Object.keys(known)
        .filter(function (id) { return !on[id]; })
        .sort(function (a, b) { return known[a].name.localeCompare(known[b].name, "pt-BR"); })
        .forEach(function (id) {
          var option = document.createElement("option");
          option.value = id;
          option.dataset.labelColour = known[id].colour;
          option.textContent = known[id].name;
          select.appendChild(option);
        });
      select.value = "";
      if (addRow) { addRow.hidden = select.options.length < 2; }
    }
  }

  function say(text, failed) {
    status.textContent = text;
    status.classList.toggle("errornote", Boolean(failed));
  }

  function send(event) {
    var form = event.target;
    var submitter = event.submitter;
    event.preventDefault();
    var data = new FormData(form);
    if (submitter && submitter.name) { data.set(submitter.name, submitter.value); }
    fetch(form.action, {
      method: "POST",
      body: data,
      headers: { Accept: "application/json" },
      credentials: "same-origin",
    })
      .then(function (response) {
        var type = response.headers.get("Content-Type") || "";
        if (type.indexOf("application/json") !== 0) { throw new Error("not JSON"); }
        return response.json();
      })
      .then(function (body) {
        if (body.error) { say(body.error, true); return; }
        redraw(body.labels || []);
        say(body.message, false);
      })
      .catch(function () { window.location.reload(); });
  }

  addForm.addEventListener("submit", send);
  removeForm.addEventListener("submit", send);
})();
