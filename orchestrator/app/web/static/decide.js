// Records a decision through POST /gates/{id}/decisions with the bearer token typed in the form.
(function () {
  "use strict";
  var form = document.getElementById("decision-form");
  if (!form) { return; }
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var message = document.getElementById("decision-message");
    // Recorded under the token's name; the note is free text kept with it.
    var body = { decision: form.decision.value, reason: form.reason.value, note: form.note.value };
    message.textContent = "saving...";
    fetch("/gates/" + form.dataset.gateId + "/decisions", {
      method: "POST",
      headers: { "Content-Type": "application/json", "Authorization": "Bearer " + form.token.value },
      body: JSON.stringify(body)
    }).then(function (resp) {
      return resp.json().then(function (data) { return { ok: resp.ok, status: resp.status, data: data }; });
    }).then(function (res) {
      if (res.ok) {
        message.textContent = "recorded";
        window.location.reload();
        return;
      }
      var detail = (res.data && res.data.detail) || [];
      message.textContent = "error " + res.status + ": " + detail.map(function (d) {
        return (d.loc || []).join(".") + " " + d.msg;
      }).join("; ");
    }).catch(function (err) { message.textContent = "error: " + err; });
  });
})();
