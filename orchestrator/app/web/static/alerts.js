// Acknowledge an alert through POST /alerts/{id}/acknowledge with the typed bearer token.
(function () {
  "use strict";
  var message = document.getElementById("ack-message");
  document.querySelectorAll(".ack-button").forEach(function (btn) {
    btn.addEventListener("click", function () {
      var token = document.getElementById("ack-token").value;
      message.textContent = "saving...";
      fetch("/alerts/" + btn.dataset.eventId + "/acknowledge", {
        method: "POST", headers: { "Authorization": "Bearer " + token }
      }).then(function (resp) {
        return resp.json().then(function (data) { return { ok: resp.ok, status: resp.status, data: data }; });
      }).then(function (res) {
        if (!res.ok) {
          var detail = (res.data && res.data.detail) || [];
          message.textContent = "error " + res.status + ": " + detail.map(function (d) { return d.msg; }).join("; ");
          return;
        }
        btn.parentElement.textContent = "acknowledged by " + res.data.acknowledged_by;
        var open = document.getElementById("num-open");
        open.textContent = String(Math.max(parseInt(open.textContent, 10) - 1, 0));
        message.textContent = "acknowledged";
      }).catch(function (err) { message.textContent = "error: " + err; });
    });
  });
})();
