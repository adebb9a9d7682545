// The prompt override form (prompts_admin/forms.py, PromptTemplateForm): the content's help
// lists the variables of the agent picked in the form only; every agent's while none is picked.
// Served as a file: the Content-Security-Policy allows no inline script.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  var select = document.getElementById("id_agent");
  if (!select) {
    return;
  }
  function showSelectedAgent() {
    document.querySelectorAll("[data-agent-variables]").forEach(function (group) {
      group.hidden = select.value !== "" && group.getAttribute("data-agent-variables") !== select.value;
    });
  }
  select.addEventListener("change", showSelectedAgent);
  showSelectedAgent();
});
