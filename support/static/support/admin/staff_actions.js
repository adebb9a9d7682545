// The staff actions of the session page (templates/admin/conversations/session/staff_actions.html
// and staff_action_forms.html): once a form is submitted its button is disabled, so a second
// click does not post it again (the server ignores a repeated submit anyway).
"use strict";
document.querySelectorAll("#staff-action-forms form.staff-action").forEach(function (form) {
  form.addEventListener("submit", function () {
    Array.prototype.forEach.call(form.elements, function (element) {
      if (element.type === "submit") {
        // After this event, so the browser still sends the form.
        setTimeout(function () { element.disabled = true; }, 0);
      }
    });
  });
});
