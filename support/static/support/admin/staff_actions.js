// The staff actions of the session page (templates/admin/conversations/session/staff_actions.html
// and staff_action_forms.html): once a form is really submitted its button is disabled, so a
// second click does not post it again (the server ignores a repeated submit anyway). A submit
// another script took over (workspace.js: a confirmation, a send with fetch) is left alone.
"use strict";
document.querySelectorAll("#staff-action-forms form.staff-action").forEach(function (form) {
  form.addEventListener("submit", function (event) {
    // After this event, so the browser still sends the form.
    setTimeout(function () {
      if (event.defaultPrevented) {
        return;
      }
      Array.prototype.forEach.call(form.elements, function (element) {
        if (element.type === "submit") {
          element.disabled = true;
        }
      });
    }, 0);
  });
});
