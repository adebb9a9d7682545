// The staff actions of the session page (templates/admin/conversations/session/staff_actions.html):
// once a form is submitted its button is disabled, so a second click does not post it again
// (the server ignores a repeated submit anyway, conversations.staff_actions).
"use strict";
document.querySelectorAll("#staff-actions form.staff-action").forEach(function (form) {
  form.addEventListener("submit", function () {
    form.querySelectorAll("button[type=submit]").forEach(function (button) {
      button.disabled = true;
    });
  });
});
